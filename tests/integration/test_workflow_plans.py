"""Releasing a dependent touches only its edges: no scan of jobs (issue 33, "Speed and scale").

auto_explain prints the plan of every statement the settle function runs inside the ack (nested
statements) to this session as NOTICEs; none of them may read jobs except by its primary key, and
job_deps only through its (parent, child) key. Built on 2,400 other jobs and ~10,000 other edges,
so a scan would be the cheaper plan had the indexes not been usable.
"""

from __future__ import annotations

import psycopg

import skiplock
from skiplock.core import state_changes


def test_the_ack_that_releases_a_dependent_reads_only_its_edges(db_url: str) -> None:
    with psycopg.connect(db_url, autocommit=True) as conn:
        roots = skiplock.enqueue_many([("plan_noise", {}) for _ in range(400)], conn=conn)
        skiplock.enqueue_many([{"queue": "plan_noise", "payload": {}, "depends_on": roots[i % 400: i % 400 + 5]}
                               for i in range(2000)], conn=conn)  # ~10,000 other edges
        parent = skiplock.enqueue("plan_parent", {}, conn=conn)
        children = skiplock.enqueue_many([{"queue": "plan_child", "payload": {}, "depends_on": [parent]}
                                          for _ in range(3)], conn=conn)
        conn.execute("ANALYZE jobs")
        conn.execute("ANALYZE job_deps")
        [job] = state_changes.claim(conn, "plans:1:w", ["plan_parent"], [30.0], 1)
        plans: list[str] = []
        conn.add_notice_handler(lambda diag: plans.append(diag.message_primary or ""))
        conn.execute("LOAD 'auto_explain'")
        for setting in ("auto_explain.log_min_duration = 0", "auto_explain.log_nested_statements = on",
                        "auto_explain.log_level = notice", "client_min_messages = notice"):
            conn.execute(f"SET {setting}")
        assert state_changes.ack_batch(conn, "plans:1:w", [state_changes.Outcome(job.id, job.queue, job.attempts,
                                                                                 "ok")]) == {parent}
        conn.execute("RESET ALL")
        nested = [p for p in plans if "job_deps" in p]
        assert nested, plans  # the settle function's statements were explained
        text = "\n".join(plans)
        assert "Seq Scan on jobs" not in text, text
        assert "Seq Scan on job_deps" not in text, text
        states = conn.execute("SELECT status::text FROM jobs WHERE id = ANY(%s)", (children,)).fetchall()
        assert [s[0] for s in states] == ["queued"] * 3
