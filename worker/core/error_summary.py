"""An error's headline and its group: one definition for the worker's log, the console's dead-letter
grouping and filter, and anything else that names an error.

The worker stores a whole traceback in `last_error`. Its *headline* is the exception line
("ConnectionError: POST https://api.example/orders/123: 503"), not the traceback's first line, which
is the same for every error. Its *group* is the exception class plus the message with the parts
that vary per job masked (ids, numbers, UUIDs, hex, quoted values, URL paths and queries), so 500
timeouts to 500 different orders make one group. Both are written with last_error, by the same
fenced statement, so the console groups and filters on stored columns.

>>> headline('Traceback (most recent call last):\\n  File "x.py", line 1, in f\\nKeyError: \\'sku-991\\'')
"KeyError: 'sku-991'"
>>> group_key("ConnectionError: POST https://api.example/orders/123?x=1: 503")
'ConnectionError: POST https://api.example/…: <n>'
>>> group_key("TimeoutError: order 5f0c6e1e-3b1f-4c43-9d1e-2f6f0a9c1d22 took 30.5s")
'TimeoutError: order <uuid> took <n>s'
"""

from __future__ import annotations

import re

MAX_HEADLINE = 300
_TRACEBACK = "Traceback (most recent call last):"

_MASKS = (
    # order matters: whole tokens first, then the numbers left inside other text
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I), "<uuid>"),
    # a URL keeps its scheme and host; its path and query (ids, tokens) are masked
    (re.compile(r"(\b[a-z][a-z0-9+.-]*://[^/?#\s'\":]+(?::\d+)?)(?:[/?#][^\s'\"]*[^\s'\":,.])?", re.I),
     r"\1/…"),
    (re.compile(r"'[^']*'|\"[^\"]*\""), "<str>"),
    (re.compile(r"\b0x[0-9a-f]+\b|\b[0-9a-f]{16,}\b", re.I), "<hex>"),
    (re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?"), "<n>"),
)


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
    """`line` (a headline) with the parts that differ from job to job masked."""
    grouped = line
    for pattern, replacement in _MASKS:
        grouped = pattern.sub(replacement, grouped)
    return grouped[:MAX_HEADLINE]


def summarize(text: str | None) -> tuple[str | None, str | None]:
    """(headline, group) to store beside last_error; (None, None) for no error."""
    line = headline(text)
    return (line, group_key(line)) if line else (None, None)
