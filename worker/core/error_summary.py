"""An error's headline and its group: one definition for the worker's log, the console's dead-letter
grouping and filter, and anything else that names an error.

The worker stores a whole traceback in `last_error`. Its *headline* is the exception line
("ConnectionError: POST https://api.example/orders/123: 503"), not the traceback's first line, which
is the same for every error. Its *group* is the exception class plus the message with the parts
that vary per job masked (ids of every shape, emails, times, free text in quotes, a URL's ids and
query), so 500 timeouts to 500 different orders make one group, while the words that name the bug
(exception class, key and field names) stay, so KeyError: 'email' and KeyError: 'phone' do not merge.
Both are written with last_error, by the same fenced statement, so the console groups and filters on
stored columns. Rows grouped by an older version of these rules keep their stored group.

>>> headline('Traceback (most recent call last):\\n  File "x.py", line 1, in f\\nKeyError: \\'sku-991\\'')
"KeyError: 'sku-991'"
>>> group_key("ConnectionError: POST https://api.example/orders/123?x=1: 503")
'ConnectionError: POST https://api.example/orders/<n>?…: 503'
>>> group_key("ValueError: customer cus_18822 has no default payment method")
'ValueError: customer cus_<n> has no default payment method'
>>> group_key("TimeoutError: order 5f0c6e1e-3b1f-4c43-9d1e-2f6f0a9c1d22 took 30.5s")
'TimeoutError: order <uuid> took <n>s'
"""

from __future__ import annotations

import re

MAX_HEADLINE = 300
# The same two in SQL, for the console's reads of jobs (rows stored before the columns fall back on
# last_error's first line, cut to 200 characters). core/sql/jobs_matching.sql writes them out in its
# statements; tests/unit/test_sql_files.py holds those copies to these texts.
HEADLINE_SQL = "coalesce(error_headline, left(split_part(coalesce(last_error, ''), E'\\n', 1), 200))"
GROUP_SQL = "coalesce(error_group, left(split_part(coalesce(last_error, ''), E'\\n', 1), 200))"
_TRACEBACK = "Traceback (most recent call last):"

# Words that end in digits but name a thing, not an instance: never masked as "prefix + id".
_KEEP = frozenset({"utf8", "utf16", "utf32", "sha1", "sha224", "sha256", "sha384", "sha512", "md5", "base32",
                   "base64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                   "float16", "float32", "float64", "ipv4", "ipv6", "http11", "http2", "http3", "oauth1",
                   "oauth2", "x509", "s3", "ec2", "py3", "python3", "tls12", "tls13", "latin1", "cp1252",
                   "iso8859", "h2", "e164"})
_A = r"(?<![A-Za-z0-9])"  # token start: no letter or digit just before
_Z = r"(?![A-Za-z0-9])"   # token end
_PREFIXED_ID = re.compile(_A + r"([A-Za-z]+)([_-]?)(\d+)" + _Z)

# The identifier shapes masked in a message, in order: whole shapes first (an email, a UUID, a time
# and an address contain numbers that the later rules would otherwise take apart), numbers last.
_MASKS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+"), "<email>"),
    (re.compile(_A + r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}" + _Z, re.I), "<uuid>"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"), "<time>"),
    (re.compile(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?(?![\w.])"), "<ip>"),
    (re.compile(_A + r"0x[0-9a-f]+" + _Z, re.I), "<hex>"),
    # a hash or token in hex: 8+ hex digits with at least one digit and one letter
    (re.compile(_A + r"(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}" + _Z, re.I), "<hex>"),
    # a long mixed alphanumeric (Stripe's cus_NffrFeUfNV2Hib after its prefix, an API token)
    (re.compile(_A + r"(?=[A-Za-z0-9]*\d)(?=[A-Za-z0-9]*[A-Za-z])[A-Za-z0-9]{10,}" + _Z), "<id>"),
)
# a number on its own; not the digits of a name that _PREFIXED_ID kept ('utf-8')
_NUMBER = re.compile(r"(?<![\w.])(?<![A-Za-z]-)[-+]?\d+(?:\.\d+)?")
_URL = re.compile(r"\b([a-z][a-z0-9+.-]*://[^/?#\s'\":]+(?::\d+)?)((?:[/?#][^\s'\"]*[^\s'\":,.])?)(?=[\s'\":,.]|$)",
                  re.I)
# A quoted value with spaces in it is free text (a name, an address, a user's input): one <str>.
# A quoted word (a key or field name: 'email') is what the bug is about, and stays.
_FREE_TEXT = re.compile(r"(?<!\w)'([^'\n]*\s[^'\n]*)'(?!\w)|(?<!\w)\"([^\"\n]*\s[^\"\n]*)\"(?!\w)")
# "ExceptionClass: message", "pkg.mod.Error: message": the class is kept as it is
_CLASS = re.compile(r"^([A-Za-z_][\w.]*): ")
# An HTTP or SMTP status code names the failure (a 503 and a 404 are different bugs), so it is kept, where
# its context says it is one: before a reason phrase ("503 Service Unavailable", "404 Client Error"),
# after a word that names it ("HTTP 502", "HTTP/1.1 503", "status 429", "status_code=500", "SMTP 550"),
# as smtplib gives it ("(550, b'...')"), or alone after a colon at the message's end ("...orders/1017: 503",
# "HTTPError: 503"). Other 3-digit numbers (an order 123) are ids, and masked.
_CODE = re.compile(r"(?<![\w.])[1-5]\d\d(?![\w.])")
_NAMED_BEFORE = re.compile(r"(?:\b(?:https?|http error|status|status[ _]code|code|smtp|response)[ :=#]*"
                           r"|\bhttp/\d(?:\.\d)? |\()$", re.I)
# the first word of the common HTTP reason phrases ("Service Unavailable", "Client Error", "Too Many Requests")
_REASON_AFTER = re.compile(r" (?:OK|Accepted|No|Moved|Found|See|Not|Temporary|Permanent|Bad|Unauthorized|Payment|"
                           r"Forbidden|Method|Request|Conflict|Gone|Length|Precondition|Unsupported|Unprocessable|"
                           r"Locked|Too|Client|Server|Internal|Service|Gateway|HTTP|Insufficient)\b")


def _is_status(text: str, match: re.Match[str]) -> bool:
    """Whether the 3-digit number `match` in `text` is a status code by its context (_CODE's comment)."""
    before, after = text[:match.start()], text[match.end():]
    if before.endswith("("):  # smtplib's (code, message) tuple
        return after.startswith(",")
    alone_at_end = not after.strip() and (not before or before.endswith(": "))
    return bool(alone_at_end or _NAMED_BEFORE.search(before) or _REASON_AFTER.match(after))


# A kept code is written as letters between two private-use marks while the masks run (no mask takes
# letters alone), then put back.
_HIDE = str.maketrans("0123456789", "abcdefghij")
_SHOW = str.maketrans("abcdefghij", "0123456789")
_HIDDEN = re.compile("\ue000([a-j]{3})\ue001")


def _prefixed(match: re.Match[str]) -> str:
    word, sep, digits = match.groups()
    if word.lower() + digits in _KEEP or (not sep and len(digits) < 2):
        return match.group(0)
    return f"{word}{sep}<n>"


def _mask(text: str) -> str:
    for pattern, replacement in _MASKS:
        text = pattern.sub(replacement, text)
    text = _PREFIXED_ID.sub(_prefixed, text)
    return _NUMBER.sub("<n>", text)


def _url(match: re.Match[str]) -> str:
    # keep the scheme, host and the path's words (/orders/, /v1/customers/); mask the path's ids;
    # a query or fragment is per request, so it is one "?…"
    origin, rest = match.group(1), match.group(2)
    cut = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    path, query = rest[:cut], rest[cut:]
    segments = [_mask(seg) for seg in path.split("/")]
    return origin + "/".join(segments) + ("?…" if query else "")


def headline(text: str | None) -> str:
    """The line that names what went wrong: the exception line of the last traceback in `text`,
    or the first line of a text that is not a traceback (an annotation such as "lease expired: ...")."""
    if not text or not text.strip():
        return ""
    lines = text.strip().splitlines()
    if not lines[0].startswith(_TRACEBACK):
        return lines[0].strip()[:MAX_HEADLINE]
    start = max(i for i, line in enumerate(lines) if line.startswith(_TRACEBACK))
    for line in lines[start + 1:]:
        # frames and source lines are indented; the exception's own line is not. A chained
        # exception's "During handling..." comes before a later Traceback, so only the last block counts
        if line and not line[0].isspace() and not line.startswith("..."):
            return line.strip()[:MAX_HEADLINE]
    return lines[-1].strip()[:MAX_HEADLINE]


def group_key(line: str) -> str:
    """`line` (a headline) with the parts that differ from job to job masked: ids of every common
    shape (numbers, prefixed ids such as cus_18822 or user42, UUIDs, hex, long mixed tokens), emails,
    times, addresses, a URL's ids and query, free text in quotes. The words that name the bug stay:
    the exception class, key and field names, a URL's host and path words."""
    found = _CLASS.match(line)
    head, message = (found.group(0), line[found.end():]) if found else ("", line)
    message = _CODE.sub(lambda m: "\ue000" + m.group(0).translate(_HIDE) + "\ue001" if _is_status(message, m)
                        else m.group(0), message)
    message = _FREE_TEXT.sub(lambda m: "'<str>'" if m.group(1) is not None else '"<str>"', message)
    # URLs first (their ids are masked segment by segment), then the rest of the message
    parts = []
    last = 0
    for url in _URL.finditer(message):
        parts.append(_mask(message[last:url.start()]))
        parts.append(_url(url))
        last = url.end()
    parts.append(_mask(message[last:]))
    kept = _HIDDEN.sub(lambda m: m.group(1).translate(_SHOW), "".join(parts))
    return (head + kept)[:MAX_HEADLINE]


def summarize(text: str | None) -> tuple[str | None, str | None]:
    """(headline, group) to store beside last_error; (None, None) for no error."""
    line = headline(text)
    return (line, group_key(line)) if line else (None, None)
