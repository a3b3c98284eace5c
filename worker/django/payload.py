"""A Django task's job as the console shows it: its task by the Django name, and its TaskResult fields.

Django-free on purpose: the console imports it, and the console also runs outside any Django project
(`skiplock web`, gunicorn). It reads the job row the console already loaded; no query of its own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

# skiplock's states as the task framework names them (skiplock/django/results.py maps the same way)
TASK_STATUS = {"queued": "READY", "waiting": "READY", "running": "RUNNING", "succeeded": "SUCCESSFUL",
               "dead": "FAILED", "failed": "FAILED"}
_KEYS = {"task", "args", "kwargs", "backend"}


def describe(job: Mapping[str, Any]) -> dict[str, Any] | None:
    """The TaskResult fields of a job that skiplock.django enqueued, or None for any other job."""
    payload = job.get("payload")
    if isinstance(payload, str):  # the job page loads it pretty-printed, as text
        try:
            payload = json.loads(payload)
        except ValueError:
            return None
    if not isinstance(payload, Mapping) or set(payload) != _KEYS or not isinstance(payload.get("task"), str):
        return None
    return {"name": payload["task"], "backend": payload["backend"], "args": payload["args"],
            "kwargs": payload["kwargs"], "status": TASK_STATUS.get(str(job.get("status")), "READY"),
            "attempts": job.get("attempts"), "enqueued_at": job.get("created_at"),
            "started_at": job.get("started_at"), "finished_at": job.get("finished_at"),
            "errors": len(job.get("attempt_errors") or []) or (1 if job.get("last_error") else 0)}


def describe_stored(state: str, result: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The same fields for a job whose row is gone, from the envelope its successful run stored
    (skiplock/django/results.py): `result` is the console's job_results row (state, text, finished_at)."""
    try:
        stored = json.loads(result["text"]) if result and result.get("text") else None
    except ValueError:  # cut for the page (a long result): the job page shows the text itself
        return None
    if not isinstance(stored, Mapping) or not isinstance(stored.get("task"), str) or "return_value" not in stored:
        return None
    return {"name": stored["task"], "backend": stored.get("backend"), "args": stored.get("args", []),
            "kwargs": stored.get("kwargs", {}), "status": TASK_STATUS.get(state, "READY"),
            "attempts": stored.get("attempts"), "enqueued_at": _when(stored.get("enqueued_at")),
            "started_at": _when(stored.get("started_at")), "finished_at": result and result.get("finished_at"),
            "errors": 0}


def _when(text: Any) -> datetime | None:
    return datetime.fromisoformat(text) if isinstance(text, str) else None
