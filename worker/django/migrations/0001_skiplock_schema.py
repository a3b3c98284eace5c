"""skiplock's schema, installed by `manage.py migrate` through skiplock's own migration runner.

The runner applies skiplock's numbered SQL migrations under its advisory lock and records them in its
own table: safe to run again, or beside a worker that starts with `--migrate`. It acts on the database
that TASKS' OPTIONS["DATABASE"] names (default: "default"); `migrate --database other` does nothing here.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations


def install_schema(apps: Any, schema_editor: Any) -> None:
    from skiplock.django.schema import install

    install(schema_editor.connection.alias)


class Migration(migrations.Migration):
    # not in Django's transaction: skiplock's runner commits on a connection of its own, under its lock
    atomic = False
    dependencies: list[tuple[str, str]] = []
    operations = [migrations.RunPython(install_schema, migrations.RunPython.noop, elidable=False)]
