"""The job page's confirmation for its buttons (retry, run now, cancel, purge, release): each destroys, stops
or starts work, so the page first says which job, on which database, and what will happen to it."""

from __future__ import annotations

from typing import Any

from flask import url_for
from flask.typing import ResponseReturnValue

from skiplock.core import transitions
from skiplock.webapp.web import confirm_page


def _what_happens(action: str, job: dict[str, Any]) -> list[str]:
    """What the action does to this job, in the words of the queue page's confirmation."""
    last = job["attempts"] >= job["max_attempts"]
    return {
        "retry": ["It goes back to its queue with its attempts reset and runs again as soon as a worker is free."],
        "run-now": [f"It was to run at {job['run_at']:%Y-%m-%d %H:%M:%S %Z}; it becomes ready now and runs as soon "
                    "as a worker is free."],
        "cancel": ["It never runs: it ends failed (\"cancelled\"), and can be retried from there. Jobs that wait "
                   "for it are cancelled with it."],
        "purge": ["It is deleted for good, with its payload and its errors. This cannot be undone."],
        "release": [("It was on its last attempt, so it becomes dead now." if last else
                     "It goes back to its queue now and runs again on a free worker."),
                    f"Its handler on worker {job['worker_id']} is NOT stopped: it runs to its end, and its result "
                    "is refused. To stop a handler, use Cancel instead."],
    }[action]


def confirm_act(job: dict[str, Any] | None, jid: int, transition: transitions.Transition) -> ResponseReturnValue:
    """The confirmation page of `transition` for job `jid` (its row as the page read it, None if gone)."""
    action = url_for("jobs.act", job_id=jid, action=transition.action)
    back = url_for("jobs.show", job_id=jid)
    verb = transition.label.lower()
    where = None if job is None else transitions.situation(job["status"], job["scheduled"])
    if job is None or where not in transition.sources:
        now = "is gone" if job is None else f"is {where} now"
        return confirm_page(transition.action, f"Job {jid} cannot be {transition.past.split(':')[0]}", [
            f"It {now}: {transition.refused}. Nothing will change; its page shows where it is."],
            action, [], transition.label, back, possible=False)
    explain = [f"1 job: job {jid} of queue {job['queue']}, {where}, attempt {job['attempts']} of "
               f"{job['max_attempts']}.", *_what_happens(transition.action, job),
               "The action is written to the audit trail."]
    return confirm_page(transition.action, f"{transition.label} job {jid}?", explain, action, [],
                        f"Yes, {verb} job {jid}", back, danger=transition.destructive)

