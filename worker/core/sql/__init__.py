"""The queue core's SQL: named, literal statements in the `.sql` files beside this module.

Each file holds the statements of one table or concern. A statement starts at a `-- name: <name>` line,
followed by at least one `-- ` line that says what it does; its text runs to the next `-- name:` line.
Any statement can be pasted into psql as written (with its `%(param)s` placeholders filled in). Variants
are written out in full: nothing is assembled from fragments. What is sent is that text squeezed: its
comments dropped and its whitespace collapsed, string literals untouched. psycopg caches its parse of a
query's placeholders only for texts of up to 4096 characters (psycopg._queries.MAX_CACHED_STATEMENT_LENGTH)
and re-parses a longer one with a regex on every execute; the claim, with its comments, is longer.

    from skiplock.core.sql import queries
    JOBS = queries("jobs")
    conn.execute(JOBS.claim_batch, {...})

A file is read once per process and kept: attribute access is a plain attribute lookup on the hot path.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_NAME = re.compile(r"^-- name: ([a-z][a-z0-9_]*)\s*$")
# A string literal or quoted name (kept as it is) or a comment (dropped), whichever starts first.
_LITERAL_OR_COMMENT = re.compile(r"'(?:[^']|'')*'|\"[^\"]*\"|--[^\n]*")
_KEPT = re.compile(r"\x00(\d+)\x00")


class SqlFileError(ValueError):
    """A `.sql` file of the core does not follow the `-- name:` format."""


class Queries:
    """The statements of one `.sql` file, as attributes named after their `-- name:` lines."""

    def __init__(self, source: str, statements: dict[str, str], descriptions: dict[str, str]) -> None:
        self._source = source
        self.descriptions = descriptions  # name -> the line(s) that say what it does
        for name, text in statements.items():
            setattr(self, name, text)

    @property
    def names(self) -> list[str]:
        """The statement names, in file order."""
        return list(self.descriptions)

    def __getattr__(self, name: str) -> str:  # only reached for a name the file does not define
        raise AttributeError(f"{self._source} has no statement named {name!r}; it has: {', '.join(self.names)}")


def parse(text: str, source: str) -> Queries:
    """The statements of a `.sql` file's text (see the module docstring for the format)."""
    statements: dict[str, list[str]] = {}
    descriptions: dict[str, list[str]] = {}
    current: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        match = _NAME.match(line)
        if match:
            current = match.group(1)
            if current in statements:
                raise SqlFileError(f"{source}:{number}: statement {current!r} is named twice")
            statements[current], descriptions[current] = [], []
        elif current is None:
            continue  # the file's header comment
        elif line.startswith("-- ") and not statements[current]:
            descriptions[current].append(line[3:].strip())  # the description: comment lines before the text
        else:
            statements[current].append(line)
    for name, lines in statements.items():
        if not descriptions[name]:
            raise SqlFileError(f"{source}: statement {name!r} has no '-- ' line saying what it does")
        if not "\n".join(lines).strip():
            raise SqlFileError(f"{source}: statement {name!r} has no text")
    return Queries(source, {n: squeeze("\n".join(ls)) for n, ls in statements.items()},
                   {n: " ".join(d) for n, d in descriptions.items()})


def squeeze(statement: str) -> str:
    """`statement` without its comments and with its whitespace squeezed (literals kept): the same SQL, shorter."""
    literals: list[str] = []

    def set_aside(match: re.Match[str]) -> str:
        if match.group().startswith("--"):
            return " "
        literals.append(match.group())
        return f"\x00{len(literals) - 1}\x00"

    code = re.sub(r"\s+", " ", _LITERAL_OR_COMMENT.sub(set_aside, statement)).strip()
    code = re.sub(r" ?([(),=<>]) ?", r"\1", code)  # no space is needed beside these
    return _KEPT.sub(lambda m: literals[int(m.group(1))], code)


@cache
def queries(name: str) -> Queries:
    """The statements of `worker/core/sql/<name>.sql` (packaged as skiplock/core/sql/<name>.sql)."""
    text = resources.files(__package__).joinpath(f"{name}.sql").read_text(encoding="utf-8")
    return parse(text, f"{name}.sql")


def all_files() -> list[str]:
    """The names of every `.sql` file of the core, for the tests that check them all."""
    return sorted(p.name[:-4] for p in resources.files(__package__).iterdir() if p.name.endswith(".sql"))
