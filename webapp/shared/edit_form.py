"""What the dead job page's "Edit and retry" form shows (the POST is webapp/pages/jobs/edit_retry.py's).

Its own module, below both: the job page (webapp/pages/jobs/detail.py) builds the form, and the POST shows the job page
again after a refusal, so neither imports the other back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import psycopg

from skiplock.core.features import payload_edit


@dataclass(frozen=True)
class EditForm:
    """What the form shows: the payload text, the digest of the payload it was made from, and a refusal."""

    text: str
    digest: str
    error: str | None = None


def form_for(conn: psycopg.Connection, job_id: int) -> EditForm | None:
    """The form for a dead job as it is now (None when the job is gone)."""
    seen = payload_edit.seen(conn, job_id)
    if seen is None:
        return None
    return EditForm(json.dumps(seen.payload, indent=2, ensure_ascii=False, sort_keys=True), seen.digest)
