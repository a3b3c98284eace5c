"""The database an action runs on, named as the operator knows it: what a confirmation states."""

from __future__ import annotations

import psycopg
from flask import current_app

from skiplock.webapp.queries import parked_queries


def database_name(conn: psycopg.Connection) -> str:
    """The console's name for its database (one console over several), else PostgreSQL's own name for it."""
    name = current_app.config.get("DATABASE_NAME")
    if name:
        return str(name)
    row = conn.execute(parked_queries.DATABASE).fetchone()
    return str(row[0]) if row else "?"
