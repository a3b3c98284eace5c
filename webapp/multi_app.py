"""`skiplock web` over several databases (SKIPLOCK_DATABASES): one console per database, mounted under
/db/<name>/ on a host console of the first, with the /databases/ page (webapp/databases.py).

Its own module, above both mount() and the databases page: mount(databases=...) uses the page, and this
factory uses mount(), so neither of them imports the other's module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flask import Flask

from skiplock.core.errors import ConfigError
from skiplock.core.plumbing.databases import configured_databases
from skiplock.webapp.app import create_app as create_single_app
from skiplock.webapp.mount import mount
from skiplock.webapp.pages import databases as databases_page


def create_app(test_config: Mapping[str, Any] | None = None) -> Flask:
    """The console's public factory (`gunicorn 'skiplock.webapp:create_app()'`, the Procfile's target).

    With SKIPLOCK_DATABASES set and no test_config, the console over every database of it; else the
    console of DATABASE_URL (webapp/app.py). One factory, so gunicorn and `skiplock web` serve the same
    console. The consoles this module builds pass their own config, so they are single-database ones.
    """
    if not test_config and configured_databases():
        return create_multi_app()
    return create_single_app(test_config)


def create_multi_app(databases: Mapping[str, str] | None = None,
                     test_config: Mapping[str, Any] | None = None) -> Flask:
    """The console over every database of `databases` (default: SKIPLOCK_DATABASES)."""
    databases = dict(databases or configured_databases() or {})
    if not databases:
        raise ConfigError("SKIPLOCK_DATABASES is not set: give name=url pairs separated by commas")
    names = list(databases)
    shared = {**(test_config or {}), "DATABASES": names}
    host = create_single_app({**shared, "DATABASE_URL": databases[names[0]], "DATABASE_NAME": names[0]})
    host.register_blueprint(databases_page.bp)
    host.context_processor(databases_page.context)
    consoles: dict[str, Flask] = {}
    for name, url in databases.items():
        console = mount(host, f"/db/{name}", authorize=databases_page.host_login, database_url=url,
                        config={**shared, "DATABASE_NAME": name})
        console.context_processor(databases_page.context)
        consoles[name] = console
    host.extensions[databases_page.CONSOLES] = consoles
    return host
