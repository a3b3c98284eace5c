"""Several skiplock databases named in one setting: SKIPLOCK_DATABASES=orders=postgresql://...,billing=...

Used by the console's database switcher (skiplock.webapp.pages.databases) and `skiplock doctor --all`.
Names are short labels for people and URLs (letters, digits, '-' and '_'); each URL is any
PostgreSQL URL or conninfo without a comma. Order is kept: the first is the console's default.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

import psycopg.conninfo

from skiplock.core.errors import ConfigError

NAME = re.compile(r"^[A-Za-z0-9_-]{1,40}$")


def parse_databases(spec: str, source: str = "SKIPLOCK_DATABASES") -> dict[str, str]:
    """'orders=postgresql://a/x,billing=postgresql://b/y' -> {"orders": ..., "billing": ...}.

    `source` names the input in error messages (the mount's `databases=` reads the same syntax).

    >>> parse_databases("orders=postgresql://db1/orders, billing=postgresql://db2/billing?sslmode=require")
    {'orders': 'postgresql://db1/orders', 'billing': 'postgresql://db2/billing?sslmode=require'}
    """
    pairs: list[tuple[str, str]] = []
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        name, sep, url = item.partition("=")
        if not sep or not url.strip():
            raise ConfigError(f"{source}: {item!r} is not name=url")
        pairs.append((name.strip(), url.strip()))
    return check_databases(pairs, source)


def check_databases(pairs: Iterable[tuple[str, str]], source: str) -> dict[str, str]:
    """The rules every list of databases follows, whichever way it was given: each name a short label
    (letters, digits, '-', '_'), named once, each URL a PostgreSQL connection string; at least one."""
    found: dict[str, str] = {}
    for name, url in pairs:
        if not isinstance(name, str) or not NAME.match(name):
            raise ConfigError(f"{source}: {name!r} is not a name (letters, digits, '-', '_')")
        if name in found:
            raise ConfigError(f"{source}: {name!r} is named twice")
        if not isinstance(url, str) or not url.strip():
            raise ConfigError(f"{source}: {name!r} has no URL")
        try:
            psycopg.conninfo.conninfo_to_dict(url)
        except psycopg.ProgrammingError as exc:
            # caught here, naming the database, rather than when its console first opens a pool
            first_line = str(exc).splitlines()[0] if str(exc) else "unparseable"
            raise ConfigError(f"{source}: {name}'s URL is not a PostgreSQL connection string: {first_line}") from None
        found[name] = url.strip()
    if not found:
        raise ConfigError(f"{source} is empty: give name=url pairs separated by commas")
    return found


def configured_databases(env: dict[str, str] | None = None) -> dict[str, str] | None:
    """SKIPLOCK_DATABASES from the environment, parsed; None when it is not set."""
    spec = (env if env is not None else os.environ).get("SKIPLOCK_DATABASES", "").strip()
    return parse_databases(spec) if spec else None
