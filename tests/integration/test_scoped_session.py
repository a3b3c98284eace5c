"""enqueue(conn=...) takes SQLAlchemy's scoped_session and async_scoped_session, the form Flask-SQLAlchemy's
`db.session` has: the job commits and rolls back with the scope's current Session (the Flask tutorial
passed `db.session` and got a TypeError)."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from skiplock import enqueue, enqueue_async
from skiplock.core.producer_async import close_default_async_pool
from tests.integration.test_user_transaction import sqlalchemy_url


def _queued(conn: psycopg.Connection) -> list[object]:
    return [r[0] for r in conn.execute("SELECT payload->>'n' FROM jobs ORDER BY id").fetchall()]


def test_a_scoped_session_commits_and_rolls_back_the_job(db_url: str, conn: psycopg.Connection) -> None:
    from sqlalchemy import create_engine, text
    from sqlalchemy.orm import scoped_session, sessionmaker

    engine = create_engine(sqlalchemy_url(db_url, "psycopg"))
    session = scoped_session(sessionmaker(bind=engine))
    try:
        session.execute(text("SELECT 1"))
        enqueue("scoped", {"n": 1}, conn=session)
        session.rollback()
        assert _queued(conn) == []
        enqueue("scoped", {"n": 2}, conn=session)
        session.commit()
        assert _queued(conn) == ["2"]
    finally:
        session.remove()
        engine.dispose()


def test_an_async_scoped_session_commits_and_rolls_back_the_job(db_url: str, conn: psycopg.Connection) -> None:
    from sqlalchemy.ext.asyncio import async_scoped_session, async_sessionmaker, create_async_engine

    async def run() -> None:
        engine = create_async_engine(sqlalchemy_url(db_url, "asyncpg"))
        session = async_scoped_session(async_sessionmaker(bind=engine), scopefunc=asyncio.current_task)
        try:
            await enqueue_async("scoped", {"n": 3}, conn=session)
            await session.rollback()
            assert _queued(conn) == []
            await enqueue_async("scoped", {"n": 4}, conn=session)
            await session.commit()
            assert _queued(conn) == ["4"]
        finally:
            await session.remove()
            await engine.dispose()
            await close_default_async_pool()

    asyncio.run(run())


@pytest.mark.parametrize("bad", [object()])
def test_the_error_names_scoped_sessions_among_what_is_accepted(bad: object) -> None:
    with pytest.raises(TypeError, match="scoped_session"):
        enqueue("scoped", {}, conn=bad)
