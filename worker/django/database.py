"""Which database holds skiplock's tables for a Django project, and its URL for skiplock's own connections.

Enqueue and get_result use Django's connection of that alias (so an enqueue joins the caller's
`transaction.atomic()`); the migrations and the worker open skiplock's own connections, to the same
database, from the URL built here out of Django's settings for the alias.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from skiplock.core.errors import ConfigError

# libpq keywords Django's connection parameters may carry that a URL can say; the rest (cursor
# factories, psycopg contexts, prepare thresholds) are Django's own business.
_URL_QUERY_KEYS = ("sslmode", "sslrootcert", "sslcert", "sslkey", "options", "application_name", "connect_timeout",
                   "service", "passfile", "target_session_attrs", "gssencmode")


def backend_aliases() -> dict[str, str]:
    """Each TASKS alias whose BACKEND is skiplock's, with the Django database alias it uses."""
    from django.conf import settings

    found = {}
    for alias, params in (getattr(settings, "TASKS", None) or {}).items():
        if str(params.get("BACKEND", "")).startswith("skiplock.django"):
            found[alias] = database_alias(params.get("OPTIONS") or {})
    return found


def database_alias(options: dict[str, Any]) -> str:
    """The Django database alias named by OPTIONS["DATABASE"] (default: "default"), checked to exist."""
    from django.db import connections

    alias = options.get("DATABASE", "default")
    if alias not in connections.settings:
        raise ConfigError(f"TASKS OPTIONS DATABASE={alias!r} is not in DATABASES ({', '.join(connections.settings)})")
    return str(alias)


def database_url(alias: str) -> str:
    """A postgresql:// URL for Django's database `alias`, from the parameters Django itself connects with."""
    from django.db import connections

    connection = connections[alias]
    if connection.vendor != "postgresql":
        raise ConfigError(f"skiplock needs PostgreSQL; the Django database {alias!r} is {connection.vendor}")
    params = connection.get_connection_params()
    auth = quote(str(params.get("user") or ""), safe="")
    if params.get("password"):
        auth += ":" + quote(str(params["password"]), safe="")
    host = str(params.get("host") or "")
    query = {k: str(params[k]) for k in _URL_QUERY_KEYS if params.get(k) not in (None, "")}
    netloc = host
    if host.startswith("/"):  # a Unix socket folder goes in the query, a URL's host cannot hold it
        query["host"], netloc = host, ""
    if params.get("port"):
        netloc += f":{params['port']}"
    dbname = quote(str(params.get("dbname") or params.get("database") or ""), safe="")
    url = f"postgresql://{auth + '@' if auth else ''}{netloc}/{dbname}"
    return url + (f"?{urlencode(query)}" if query else "")
