"""What the job page shows of a job's place in a workflow: parents, dependents, workflow, batch and
stored result. Read-only (workflow_queries); works for a job whose row is gone as well."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import dict_row

from skiplock.webapp.queries import workflow_queries as wq

LINKS_SHOWN = 100  # parents, and dependents, listed on the page (the counts are exact)
RESULT_CHARS = 4000  # the result is cut here unless the page asks for all of it (?result=all)


@dataclass(frozen=True)
class JobLinks:
    parents: list[dict[str, Any]]
    dependents: list[dict[str, Any]]
    parent_count: int
    dependent_count: int
    workflow: int | None  # the root of its workflow (itself when it is a root with dependents)
    batch: int | None  # the batch it is a member of, or calls back for
    callback_of: int | None  # the batch this job is a callback of
    result: dict[str, Any] | None  # job_results' row: state, error, text (pretty JSON), length

    @property
    def result_cut(self) -> bool:
        if not self.result or self.result["text"] is None:
            return False
        return bool(self.result["length"] > len(self.result["text"]))

    @property
    def any(self) -> bool:
        return bool(self.parent_count or self.dependent_count or self.batch or self.callback_of or self.result)


def read(conn: psycopg.Connection, job_id: int, full_result: bool = False) -> JobLinks:
    """The job's links and result; `full_result` reads the whole result instead of its first RESULT_CHARS."""
    with conn.cursor(row_factory=dict_row) as cur:
        counts = cur.execute(wq.JOB_LINK_COUNTS, {"id": job_id}).fetchone()
        assert counts is not None  # a SELECT without FROM: one row always
        parents = cur.execute(wq.JOB_PARENTS, {"id": job_id, "limit": LINKS_SHOWN}).fetchall() \
            if counts["parents"] else []
        dependents = cur.execute(wq.JOB_DEPENDENTS, {"id": job_id, "limit": LINKS_SHOWN}).fetchall() \
            if counts["dependents"] else []
        of = cur.execute(wq.WORKFLOW_OF, {"id": job_id}).fetchone()
        result = cur.execute(wq.JOB_RESULT, {"id": job_id, "chars": 2**30 if full_result else RESULT_CHARS}).fetchone()
    workflow = of["workflow_id"] if of else None
    if workflow is None and counts["dependents"]:
        workflow = job_id  # a root: its dependents name it as their workflow
    return JobLinks(parents, dependents, int(counts["parents"]), int(counts["dependents"]), workflow,
                    (of["batch_id"] if of else None) or counts["callback_of"], counts["callback_of"], result)
