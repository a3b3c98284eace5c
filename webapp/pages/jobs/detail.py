"""Job detail: payload, last error with traceback, timestamps, attempts, worker and unique key,
with the actions the job's state allows (retry, purge, cancel, run now, release); for a durable job, its
steps, cursors and what it is parked on (templates/jobs/_durable.html)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from flask import Blueprint, abort, flash, g, redirect, request, url_for
from flask.typing import ResponseReturnValue
from psycopg.rows import dict_row

from skiplock.core import transitions
from skiplock.core.durable import service
from skiplock.core.features import job_logs, payload_edit
from skiplock.core.plumbing.config import Settings
from skiplock.core.sql import queries
from skiplock.core.status import JobStatus
from skiplock.django import payload as django_payload
from skiplock.monitor import why
from skiplock.webapp import db, filters
from skiplock.webapp.pages.jobs import act_confirm, stack
from skiplock.webapp.queries import page_queries, workflow_queries
from skiplock.webapp.shared import attempt_groups, edit_form, job_links, timeline
from skiplock.webapp.web import audit, confirmed, page

bp = Blueprint("jobs", __name__, url_prefix="/jobs")

# The attempts whose log lines the job page shows in full (the others: a link, ?logs=all); each is at most
# worker/runtime/job_logs.py's MAX_BYTES, so the page stays small for a job retried many times.
LOG_ATTEMPTS_SHOWN = 3
HISTORY_SQL = queries("jobs_history_search")  # a job moved to jobs_history (history mode partitioned)



@bp.route("/<job_id>")
def show(job_id: str) -> ResponseReturnValue:
    """One job; 400 for a malformed id, 404 when there is no such job (any more).

    A job whose row is gone (history mode delete) but whose result or links remain gets a short
    page with what is still known: its final state, result, parents and dependents."""
    return render_job(filters.required_job_id(job_id))


def render_job(jid: int, form: edit_form.EditForm | None = None, code: int = 200) -> ResponseReturnValue:
    """The job page; after a refused "Edit and retry", with the operator's text and why (edit_retry.py beside it)."""
    full_result = request.args.get("result") == "all"
    with db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
        job = cur.execute(page_queries.JOB, {"id": jid}).fetchone()
        links = job_links.read(conn, jid, full_result)
        if job is None:
            gone = cur.execute(workflow_queries.GONE_JOB, {"id": jid}).fetchone()
            if gone is None or not (gone["has_result"] or gone["linked"]):
                archived = cur.execute(HISTORY_SQL.history_job, {"id": jid}).fetchone()
                if archived is not None:  # moved to jobs_history: what it kept, read-only
                    return page("jobs/job_history.html", "jobs/_job_history.html", job=archived)
                abort(404, _gone_reason(conn, jid))
            return page("jobs/job_gone.html", "jobs/_job_gone.html", job=gone, links=links,
                        django_task=django_payload.describe_stored(gone["state"], links.result))
        reasons = why.for_job(conn, jid, Settings().reaper_interval) or []
        edits = payload_edit.edits_of(conn, jid)  # the payloads an operator replaced (migration 032)
        steps = timeline.build(job, edits)
        # a durable job's stored steps and cursors, and what it is parked on (the core's reads)
        durable = {"parked_on": service.parked_on(conn, jid) if job["status"] == JobStatus.PARKED else None,
                   "durable_steps": service.steps_of(conn, jid), "durable_cursors": service.cursors_of(conn, jid)}
        # the handler's own log lines: the latest attempts' in full, every attempt's count on the timeline
        all_logs = request.args.get("logs") == "all"
        logs = job_logs.of_job(conn, jid, 1000 if all_logs else LOG_ATTEMPTS_SHOWN)
        log_counts = job_logs.counts_of_job(conn, jid)
        stack_row = stack.read(conn, job)  # a running job's "Show stack" panel (stack.py beside this)
        if form is None and job["status"] == JobStatus.DEAD:
            form = edit_form.form_for(conn, jid)
    actions = transitions.allowed(transitions.situation(job["status"], job["scheduled"]))
    if job.get("cancel_requested_at"):  # asked already: the page says so instead of offering it again
        actions = [t for t in actions if t.action != "cancel-running"]
    # a parked job's "wake now" is in its parked block, behind a confirmation (pages/jobs/parked_actions.py)
    actions = [t for t in actions if t.action != "wake"]
    response = page("jobs/job.html", "jobs/_job.html", job=job, reasons=reasons, back=_back_link(job), actions=actions,
                    last_worker=_last_worker(job), runtime_s=_runtime(job), links=links, steps=steps, edits=edits,
                    edit_form=form, django_task=django_payload.describe(job), logs=logs, log_counts=log_counts,
                    stack=stack_row, attempt_groups=attempt_groups.group(job.get("attempt_errors")), **durable)
    response.status_code = code
    return response


# The list each status is shown in on its queue's page (ready and scheduled are both 'queued').
_TAB_OF = {s.value: s.value for s in (JobStatus.RUNNING, JobStatus.DEAD, JobStatus.FAILED, JobStatus.SUCCEEDED)}


def _back_link(job: dict[str, Any]) -> str:
    """Where "back" goes: the console page the operator came from, else the job's tab on its queue page."""
    came_from = request.referrer or ""
    parts = urlsplit(came_from)
    if parts.netloc == request.host and parts.path.startswith(request.script_root + "/") \
            and "/jobs/" not in parts.path:
        return parts.path + (f"?{parts.query}" if parts.query else "")
    tab = _TAB_OF.get(job["status"], transitions.SCHEDULED if job["scheduled"] else transitions.READY)
    return url_for("queues.show", name=job["queue"], status=tab)


def _last_worker(job: dict[str, Any]) -> str | None:
    """The worker that ran it last: the lease holder while running, else the last failed attempt's worker
    (a failure clears worker_id; attempt_errors keeps who ran each failed attempt)."""
    if job["worker_id"]:
        return str(job["worker_id"])
    attempts = job.get("attempt_errors") or []
    return str(attempts[-1].get("worker")) if attempts else None


def _runtime(job: dict[str, Any]) -> float | None:
    """Seconds the latest run took (finished) or has taken so far (running).

    A failed run's own handler time is in its attempt record; finished_at - started_at would add the
    ack batch's wait to it."""
    if job["started_at"] is None:
        return None
    attempts = job.get("attempt_errors") or []
    if job["status"] != JobStatus.RUNNING and attempts and attempts[-1].get("attempt") == job["attempts"] \
            and attempts[-1].get("duration_ms") is not None:
        return float(attempts[-1]["duration_ms"]) / 1000.0
    if job["status"] == JobStatus.RUNNING:
        return (job["now"] - job["started_at"]).total_seconds()
    if job["finished_at"] is not None and job["finished_at"] >= job["started_at"]:
        return (job["finished_at"] - job["started_at"]).total_seconds()
    return None


@bp.route("/<job_id>/<action>", methods=["POST"])
def act(job_id: str, action: str) -> ResponseReturnValue:
    """Apply one action to one job after its confirmation; a job no longer in the right state is reported,
    not changed."""
    jid = filters.required_job_id(job_id)
    transition = transitions.BY_ACTION.get(action) or abort(404, f"unknown action {action[:40]!r}")
    if not confirmed():  # each of them destroys, stops or starts work: say what first (act_confirm.py)
        with db.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
            job = cur.execute(page_queries.JOB, {"id": jid}).fetchone()
        return act_confirm.confirm_act(job, jid, transition)
    with db.connection() as conn, conn.transaction():  # the change and its audit row commit together
        changed = transition.apply(conn, [jid], str(g.user))
        audit(action, len(changed), conn=conn, ids=[jid])
    if changed:
        flash(f"Job {jid} {transition.past}.")
    else:
        flash(f"Job {jid} was not changed: {transition.refused} (any more).", "error")
    if action == "purge" and changed:
        return redirect(url_for("dead.index"), 303)
    return redirect(url_for("jobs.show", job_id=jid), 303)


def _gone_reason(conn: Any, jid: int) -> str:
    """Why a job's page has nothing to show. After "Edit and retry" an operator comes back to the page of
    the job they fixed: it usually succeeded, and the default history mode deletes a succeeded job."""
    edits = payload_edit.edits_of(conn, jid)
    if edits:
        last = edits[-1]
        return (f"Job {jid} is gone: {last['actor']} edited and retried it ({last['at']:%Y-%m-%d %H:%M:%S %Z}), "
                "and it has finished since. A succeeded job is deleted unless SKIPLOCK_HISTORY_MODE keeps it; "
                "the edit, with both payloads, is on the Audit page.")
    return f"No job {jid}: it never existed, or it finished and was deleted (or purged)."
