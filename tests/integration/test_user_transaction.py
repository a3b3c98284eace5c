"""Enqueue in the caller's own transaction, whatever it holds (issue 13, items 1 and 2).

Every kind of `conn=`: a rollback leaves no job and sends no wake-up; a commit makes the job run on
a real worker. Real drivers on the real test database: psycopg 3, psycopg2, SQLAlchemy on both,
Django, and for asyncio psycopg's AsyncConnection, SQLAlchemy's AsyncSession on asyncpg, and the
built-in async pool.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import psycopg.conninfo
import pytest

from skiplock import enqueue, enqueue_async, enqueue_many, enqueue_many_async
from skiplock.core.producer_async import close_default_async_pool
from tests.support.helpers import scalar, wait_for

# ---- the sync kinds: each opens a transaction and yields (conn, finish(commit: bool)) -----------

Opened = Iterator[tuple[Any, Callable[[bool], None]]]


def _ends(commit: Callable[[], None], rollback: Callable[[], None]) -> Callable[[bool], None]:
    return lambda ok: commit() if ok else rollback()


@contextlib.contextmanager
def psycopg3_conn(url: str) -> Opened:
    with psycopg.connect(url) as conn:
        yield conn, _ends(conn.commit, conn.rollback)


@contextlib.contextmanager
def psycopg2_conn(url: str) -> Opened:
    import psycopg2

    conn = psycopg2.connect(url)
    try:
        yield conn, _ends(conn.commit, conn.rollback)
    finally:
        conn.close()


def sqlalchemy_url(url: str, driver: str) -> Any:
    """The test database's URL for SQLAlchemy with `driver` (the fixtures hand out conninfo text)."""
    from sqlalchemy.engine import URL

    info = psycopg.conninfo.conninfo_to_dict(url)
    text = {k: str(v) for k, v in info.items() if v is not None}  # conninfo values are text or numbers
    return URL.create(f"postgresql+{driver}", username=text.get("user"), password=text.get("password"),
                      host=text.get("host"), port=int(text["port"]) if text.get("port") else None,
                      database=text.get("dbname"))


def _engine(url: str, driver: str) -> Any:
    import sqlalchemy

    return sqlalchemy.create_engine(sqlalchemy_url(url, driver))


@contextlib.contextmanager
def sqlalchemy_session(url: str, driver: str) -> Opened:
    from sqlalchemy import text
    from sqlalchemy.orm import Session

    engine = _engine(url, driver)
    try:
        with Session(engine) as session:
            session.execute(text("SELECT 1"))  # the caller's own work comes first, as in an app
            yield session, _ends(session.commit, session.rollback)
    finally:
        engine.dispose()


@contextlib.contextmanager
def sqlalchemy_connection(url: str, driver: str) -> Opened:
    engine = _engine(url, driver)
    try:
        with engine.connect() as conn:  # commit-as-you-go, nothing run yet: enqueue begins it
            yield conn, _ends(conn.commit, conn.rollback)
    finally:
        engine.dispose()


@contextlib.contextmanager
def flask_sqlalchemy_session(url: str) -> Opened:
    """Flask-SQLAlchemy's `db.session`: a scoped_session, what a Flask view holds (issue 35, defect 1)."""
    from flask import Flask
    from flask_sqlalchemy import SQLAlchemy
    from sqlalchemy import text

    app = Flask(__name__)
    app.config["SQLALCHEMY_DATABASE_URI"] = sqlalchemy_url(url, "psycopg")
    db = SQLAlchemy(app)
    with app.app_context():
        try:
            db.session.execute(text("SELECT 1"))
            yield db.session, _ends(db.session.commit, db.session.rollback)
        finally:
            db.session.remove()
            db.engine.dispose()


def _django_setup(url: str) -> None:
    # settings.configure(), not DJANGO_SETTINGS_MODULE in os.environ: the variable would outlive this test in
    # the xdist process and reach every subprocess started later (an installed worker then sets Django up)
    import django
    from django.conf import settings
    from django.db import connections

    if not settings.configured:
        from tests.support import django_settings

        settings.configure(**{name: getattr(django_settings, name) for name in dir(django_settings)
                              if name.isupper()})
    django.setup()
    # Settings are configured once per process, but each test has a database of its own (tests/conftest.py's
    # db_url): the default alias is pointed at this test's, else a later test enqueued into an earlier one's
    info = psycopg.conninfo.conninfo_to_dict(url)
    connections.close_all()
    connections["default"].settings_dict.update(NAME=info.get("dbname", "postgres"), USER=info.get("user", "postgres"),
                                                PASSWORD=info.get("password", ""), HOST=info.get("host", "127.0.0.1"),
                                                PORT=str(info.get("port", 5432)))


@contextlib.contextmanager
def django_conn(url: str, proxy: bool) -> Opened:
    _django_setup(url)
    from django.db import connection, connections, transaction

    with contextlib.ExitStack() as stack:
        stack.callback(connections.close_all)
        stack.enter_context(transaction.atomic())

        def finish(ok: bool) -> None:
            if not ok:
                transaction.set_rollback(True)
            stack.close()

        yield (connection if proxy else connections["default"]), finish


SYNC_KINDS: dict[str, Callable[[str], contextlib.AbstractContextManager[tuple[Any, Callable[[bool], None]]]]] = {
    "psycopg3": psycopg3_conn,
    "psycopg2": psycopg2_conn,
    "sqlalchemy-session-psycopg2": lambda url: sqlalchemy_session(url, "psycopg2"),
    "sqlalchemy-session-psycopg3": lambda url: sqlalchemy_session(url, "psycopg"),
    "sqlalchemy-connection-psycopg3": lambda url: sqlalchemy_connection(url, "psycopg"),
    "sqlalchemy-connection-psycopg2": lambda url: sqlalchemy_connection(url, "psycopg2"),
    "flask-sqlalchemy-db-session": flask_sqlalchemy_session,
    "django-connection": lambda url: django_conn(url, proxy=True),
    "django-connections-alias": lambda url: django_conn(url, proxy=False),
}


# ---- wake-ups -----------------------------------------------------------------------------------

@contextlib.contextmanager
def wakeups(url: str) -> Iterator[Callable[[], list[str]]]:
    """LISTEN on skiplock_jobs and skiplock_handoff; the callable returns every payload sent since, up to
    a sentinel NOTIFY sent last (notifications arrive in commit order, so none sent before it is missed).
    A hand-off (migration 020: the job claimed for an idle worker, in the NOTIFY) comes as "handoff"."""
    with psycopg.connect(url, autocommit=True) as listener:
        listener.execute("LISTEN skiplock_jobs")
        listener.execute("LISTEN skiplock_handoff")

        def received() -> list[str]:
            with psycopg.connect(url, autocommit=True) as other:
                other.execute("SELECT pg_notify('skiplock_jobs', '--sentinel--')")
            payloads: list[str] = []
            for note in listener.notifies(timeout=10):
                if note.payload == "--sentinel--":
                    return payloads
                payloads.append("handoff" if note.channel == "skiplock_handoff" else note.payload)
            raise AssertionError("the sentinel notification never arrived")

        yield received


def _jobs(conn: psycopg.Connection, queue: str) -> int:
    return scalar(conn, "SELECT count(*) FROM jobs WHERE queue = %s", (queue,))


# ---- sync -----------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", list(SYNC_KINDS))
def test_rollback_leaves_no_job_and_no_wakeup(kind: str, db_url: str, conn: psycopg.Connection) -> None:
    with wakeups(db_url) as received, SYNC_KINDS[kind](db_url) as (user_conn, finish):
        job_id = enqueue("tx_rolled_back", {"kind": kind}, conn=user_conn)
        ids = enqueue_many([("tx_rolled_back", {"n": n}) for n in range(3)], conn=user_conn)
        assert job_id is not None and len(ids) == 3
        finish(False)
        assert _jobs(conn, "tx_rolled_back") == 0
        assert received() == []


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(SYNC_KINDS))
def test_commit_makes_the_job_run(kind: str, db_url: str, conn: psycopg.Connection,
                                  spawn_worker: Callable[..., Any]) -> None:
    spawn_worker(SKIPLOCK_QUEUES="t1")
    # the trigger notifies only while a worker waits (migration 014): let the worker go idle first
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM queue_waiters") == 1, timeout=60, message="an idle worker")
    with wakeups(db_url) as received, SYNC_KINDS[kind](db_url) as (user_conn, finish):
        job_id = enqueue("t1", {"kind": kind}, conn=user_conn)
        [other_id] = enqueue_many([("t1", {"kind": kind, "many": True})], conn=user_conn)
        assert _jobs(conn, "t1") == 0  # not visible before the commit
        finish(True)
        # the wake-up fired on commit: the idle worker was handed the first job (the second
        # statement found its token taken), or told that some queue has work
        assert received() in (["handoff"], [""])
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM test_effects") == 2, message="both jobs to run")
    assert sorted(scalar(conn, "SELECT array_agg(job_id) FROM test_effects")) == sorted([job_id, other_id])
    wait_for(lambda: _jobs(conn, "t1") == 0, message="both jobs acked")


def test_dict_rows_set_by_the_caller_do_not_matter(db_url: str, conn: psycopg.Connection) -> None:
    """A connection whose rows are dicts (psycopg's dict_row, psycopg2's RealDictCursor) still
    gets the job id back: skiplock asks for tuple rows on its own cursor."""
    import psycopg2
    import psycopg2.extras
    from psycopg.rows import dict_row

    with psycopg.connect(db_url, row_factory=dict_row) as p3:
        assert isinstance(enqueue("tx_dicts", {"a": 1}, conn=p3), int)
        assert len(enqueue_many([("tx_dicts", {"a": 2})], conn=p3)) == 1
        assert len(enqueue_many([("tx_dicts", {"n": n}) for n in range(300)], conn=p3)) == 300  # COPY path
    p2 = psycopg2.connect(db_url, cursor_factory=psycopg2.extras.RealDictCursor)
    try:
        assert isinstance(enqueue("tx_dicts", {"a": 3}, conn=p2), int)
        p2.commit()
    finally:
        p2.close()
    assert _jobs(conn, "tx_dicts") == 303


class NotAConnection:
    pass


@pytest.mark.parametrize("bad", [NotAConnection(), "postgresql://x", None.__class__])
def test_unsupported_conn_is_a_clear_type_error(bad: object, conn: psycopg.Connection) -> None:
    with pytest.raises(TypeError, match=r"conn= must be a psycopg 3 Connection, a psycopg2 connection, "
                                        r"an SQLAlchemy Connection, Session or scoped_session .* Django"):
        enqueue("tx_bad", {"a": 1}, conn=bad)
    with pytest.raises(TypeError, match="conn= must be"):
        enqueue_many([("tx_bad", {"a": 1})], conn=bad)
    with pytest.raises(TypeError, match=r"conn= must be a psycopg AsyncConnection, an asyncpg Connection"):
        asyncio.run(enqueue_async("tx_bad", {"a": 1}, conn=bad))
    assert _jobs(conn, "tx_bad") == 0


def test_optional_libraries_are_not_imported_by_skiplock() -> None:
    import subprocess
    import sys

    code = ("import sys, skiplock; "
            "print(sorted(m for m in ('sqlalchemy', 'django', 'psycopg2', 'asyncpg') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ---- asyncio ------------------------------------------------------------------------------------

@contextlib.asynccontextmanager
async def async_kind(url: str, kind: str):
    if kind == "psycopg3-async":
        async with await psycopg.AsyncConnection.connect(url) as aconn:
            yield aconn, aconn.commit, aconn.rollback
        return
    if kind.startswith("asyncpg-"):  # a bare asyncpg connection, or one from an asyncpg pool (issue 35, defect 5)
        import asyncpg

        info = psycopg.conninfo.conninfo_to_dict(url)
        params = {"host": info.get("host"), "port": int(info.get("port") or 5432), "user": info.get("user"),
                  "password": info.get("password"), "database": info.get("dbname")}
        async with contextlib.AsyncExitStack() as stack:
            if kind == "asyncpg-pool-connection":
                pool = await stack.enter_async_context(asyncpg.create_pool(min_size=1, max_size=1, **params))
                apg = await stack.enter_async_context(pool.acquire())
            else:
                apg = await asyncpg.connect(**params)
                stack.push_async_callback(apg.close)
            transaction = apg.transaction()
            await transaction.start()
            await apg.execute("SELECT 1")  # the caller's own work comes first, as in an app
            yield apg, transaction.commit, transaction.rollback
        return
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import AsyncSession, async_scoped_session, async_sessionmaker, create_async_engine

    driver = {"sqlalchemy-asyncsession-asyncpg": "asyncpg", "sqlalchemy-asyncsession-psycopg": "psycopg",
              "sqlalchemy-asyncconnection-asyncpg": "asyncpg",
              "sqlalchemy-async-scoped-session-asyncpg": "asyncpg"}[kind]
    engine = create_async_engine(sqlalchemy_url(url, driver))
    try:
        if "scoped" in kind:  # what FastAPI apps often hold: one AsyncSession per task (issue 35, defect 1)
            scoped = async_scoped_session(async_sessionmaker(engine), scopefunc=asyncio.current_task)
            try:
                await scoped.execute(text("SELECT 1"))
                yield scoped, scoped.commit, scoped.rollback
            finally:
                await scoped.remove()
        elif "asyncconnection" in kind:
            async with engine.connect() as sa_conn:
                yield sa_conn, sa_conn.commit, sa_conn.rollback
        else:
            async with AsyncSession(engine) as session:
                await session.execute(text("SELECT 1"))
                yield session, session.commit, session.rollback
    finally:
        await engine.dispose()


ASYNC_KINDS = ["psycopg3-async", "sqlalchemy-asyncsession-asyncpg", "sqlalchemy-asyncsession-psycopg",
               "sqlalchemy-asyncconnection-asyncpg", "sqlalchemy-async-scoped-session-asyncpg", "asyncpg-connection",
               "asyncpg-pool-connection"]


@pytest.mark.parametrize("kind", ASYNC_KINDS)
def test_async_rollback_leaves_no_job_and_no_wakeup(kind: str, db_url: str, conn: psycopg.Connection) -> None:
    async def scenario() -> None:
        async with async_kind(db_url, kind) as (user_conn, _commit, rollback):
            assert await enqueue_async("tx_rolled_back", {"kind": kind}, conn=user_conn) is not None
            assert len(await enqueue_many_async([("tx_rolled_back", {"n": 1}), ("tx_rolled_back", {"n": 2})],
                                                conn=user_conn)) == 2
            await rollback()

    with wakeups(db_url) as received:
        asyncio.run(scenario())
        assert _jobs(conn, "tx_rolled_back") == 0
        assert received() == []


@pytest.mark.slow
@pytest.mark.parametrize("kind", [*ASYNC_KINDS, "async-pool"])
def test_async_commit_makes_the_job_run(kind: str, db_url: str, conn: psycopg.Connection,
                                        spawn_worker: Callable[..., Any]) -> None:
    spawn_worker(SKIPLOCK_QUEUES="t1")

    async def scenario() -> list[int]:
        if kind == "async-pool":  # no conn=: the lazily built async pool, autocommit
            try:
                one = await enqueue_async("t1", {"kind": kind})
                many = await enqueue_many_async([("t1", {"kind": kind, "many": True})])
                return [one, *many]
            finally:
                await close_default_async_pool()
        async with async_kind(db_url, kind) as (user_conn, commit, _rollback):
            one = await enqueue_async("t1", {"kind": kind}, conn=user_conn)
            many = await enqueue_many_async([("t1", {"kind": kind, "many": True})], conn=user_conn)
            assert _jobs(conn, "t1") == 0  # not visible before the commit
            await commit()
            return [one, *many]

    ids = asyncio.run(scenario())
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM test_effects") == 2, message="both jobs to run")
    assert sorted(scalar(conn, "SELECT array_agg(job_id) FROM test_effects")) == sorted(ids)
    wait_for(lambda: _jobs(conn, "t1") == 0, message="both jobs acked")
