"""Several skiplock databases named in one setting: SKIPLOCK_DATABASES=orders=postgresql://...,billing=...

Used by the console's database switcher (skiplock.webapp.databases) and `skiplock doctor --all`.
Names are short labels for people and URLs (letters, digits, '-' and '_'); each URL is any
PostgreSQL URL or conninfo without a comma. Order is kept: the first is the console's default.
"""

from __future__ import annotations

import os
import re

from skiplock.core.errors import ConfigError

NAME = re.compile(r"^[A-Za-z0-9_-]{1,40}$")


def parse_databases(spec: str) -> dict[str, str]:
    """'orders=postgresql://a/x,billing=postgresql://b/y' -> {"orders": ..., "billing": ...}.

    >>> parse_databases("orders=postgresql://db1/orders, billing=postgresql://db2/billing?sslmode=require")
    {'orders': 'postgresql://db1/orders', 'billing': 'postgresql://db2/billing?sslmode=require'}
    """
    found: dict[str, str] = {}
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        name, sep, url = item.partition("=")
        name, url = name.strip(), url.strip()
        if not sep or not url:
            raise ConfigError(f"SKIPLOCK_DATABASES: {item!r} is not name=url")
        if not NAME.match(name):
            raise ConfigError(f"SKIPLOCK_DATABASES: {name!r} is not a name (letters, digits, '-', '_')")
        if name in found:
            raise ConfigError(f"SKIPLOCK_DATABASES: {name!r} is named twice")
        found[name] = url
    if not found:
        raise ConfigError("SKIPLOCK_DATABASES is empty: give name=url pairs separated by commas")
    return found


def configured_databases(env: dict[str, str] | None = None) -> dict[str, str] | None:
    """SKIPLOCK_DATABASES from the environment, parsed; None when it is not set."""
    spec = (env if env is not None else os.environ).get("SKIPLOCK_DATABASES", "").strip()
    return parse_databases(spec) if spec else None
