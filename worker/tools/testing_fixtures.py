"""The pytest plugin of `skiplock.testing`: the three fixtures (see worker/tools/testing.py's module doc).

A module of its own because it imports pytest, which an application's runtime does not install:
`skiplock.testing` re-exports these only when pytest is importable, and its functions never need it.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from skiplock.core.plumbing.migrate import apply_migrations
from skiplock.core.producer import close_default_pool


def _with_database(url: str, name: str) -> str:
    return make_conninfo(url, dbname=name)


@pytest.fixture(scope="session")
def skiplock_database_url() -> Iterator[str]:
    """A migrated database for this session; DATABASE_URL points at it meanwhile (see the module doc)."""
    given = os.environ.get("SKIPLOCK_TEST_DATABASE_URL")
    server = os.environ.get("SKIPLOCK_TEST_SERVER_URL") or os.environ.get("DATABASE_URL")
    created: str | None = None
    if given:
        url = given
    elif server:
        created = f"skiplock_test_{os.getpid()}_{uuid.uuid4().hex[:6]}"
        with psycopg.connect(_with_database(server, "postgres"), autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{created}"')
        url = _with_database(server, created)
    else:
        raise pytest.UsageError("skiplock.testing needs a PostgreSQL server: set DATABASE_URL (a test "
                                "database is created on its server) or SKIPLOCK_TEST_DATABASE_URL")
    previous = os.environ.get("DATABASE_URL")
    close_default_pool()  # a producer pool opened before points at the old DATABASE_URL
    os.environ["DATABASE_URL"] = url
    try:
        apply_migrations(url)
        yield url
    finally:
        close_default_pool()
        if previous is None:
            os.environ.pop("DATABASE_URL", None)
        else:
            os.environ["DATABASE_URL"] = previous
        if created is not None and server:
            with psycopg.connect(_with_database(server, "postgres"), autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{created}" WITH (FORCE)')


@pytest.fixture
def skiplock_db(skiplock_database_url: str) -> str:
    """The session's database with every table but the migration record emptied, for this test."""
    with psycopg.connect(skiplock_database_url, autocommit=True) as conn:
        tables = [row[0] for row in conn.execute(
            """SELECT format('%I.%I', schemaname, tablename) FROM pg_tables
                WHERE schemaname = current_schema() AND tablename <> 'skiplock_migrations'""")]
        if tables:
            # one statement: TRUNCATE of related tables together needs no ordering
            conn.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE")
    return skiplock_database_url


@pytest.fixture
def skiplock_conn(skiplock_db: str) -> Iterator[psycopg.Connection]:
    """An autocommit connection to the emptied test database."""
    with psycopg.connect(skiplock_db, autocommit=True) as conn:
        yield conn
