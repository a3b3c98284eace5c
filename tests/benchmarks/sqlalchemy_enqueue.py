"""Enqueue through an SQLAlchemy Session on psycopg2, one job per transaction (issue 13's benchmark).

skiplock: `enqueue(..., conn=session)` then `session.commit()`. The floor: the hand-written INSERT
an application would otherwise run, on the very same connection (the psycopg2 connection of the
Session's transaction), then `session.commit()`. Both build the same payload per job.
"""

from __future__ import annotations

import json
import time
from typing import Any

from skiplock.tools.bench import BENCH_QUEUE


def _session(url: str) -> Any:
    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session

    from tests.benchmarks.compare import as_url

    engine = create_engine(as_url(url).replace("postgresql://", "postgresql+psycopg2://", 1))
    return engine, Session(engine)


def skiplock_via_session(url: str, jobs: int) -> dict[str, Any]:
    from skiplock import enqueue

    engine, session = _session(url)
    with session:
        enqueue(BENCH_QUEUE, {"warm": True}, conn=session)  # connect and warm up outside the timing
        session.commit()
        started = time.perf_counter()
        for i in range(jobs):
            enqueue(BENCH_QUEUE, {"n": i}, conn=session)
            session.commit()
        elapsed = time.perf_counter() - started
    engine.dispose()
    return {"jobs": jobs, "seconds": elapsed, "jobs_per_s": jobs / elapsed}


def raw_insert_via_session(url: str, jobs: int) -> dict[str, Any]:
    engine, session = _session(url)
    with session:
        session.connection()
        session.commit()
        started = time.perf_counter()
        for i in range(jobs):
            driver = session.connection().connection.driver_connection
            with driver.cursor() as cur:
                cur.execute("INSERT INTO jobs (queue, payload) VALUES (%s, %s::jsonb) RETURNING id",
                            (BENCH_QUEUE, json.dumps({"n": i})))
                cur.fetchone()
            session.commit()
        elapsed = time.perf_counter() - started
    engine.dispose()
    return {"jobs": jobs, "seconds": elapsed, "jobs_per_s": jobs / elapsed}
