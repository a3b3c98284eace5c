"""skiplock's schema in a Django project's database: which aliases get it, and applying it.

The Django migration `skiplock.0001_skiplock_schema` installs it; the post_migrate hook (apps.py) runs
the same runner after every `migrate`, so skiplock's own later migrations arrive with an upgrade of the
package, without a new Django migration each. The runner applies each SQL migration once, under
skiplock's advisory lock, and records it: running it again applies nothing.
"""

from __future__ import annotations

from skiplock.django.database import backend_aliases, database_url


def schema_aliases() -> set[str]:
    """The Django database aliases that hold skiplock's tables: TASKS' skiplock backends' DATABASE, else
    "default" (the app installed for the console or skiplock's own API alone)."""
    return set(backend_aliases().values()) or {"default"}


def install(alias: str) -> list[str]:
    """Apply skiplock's pending migrations to Django's database `alias` if it holds skiplock; what was applied."""
    from skiplock.core.plumbing.migrate import apply_migrations

    if alias not in schema_aliases():
        return []
    return apply_migrations(database_url(alias))
