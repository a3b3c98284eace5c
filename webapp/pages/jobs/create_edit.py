"""Create a job from the console, and edit a queued (ready or scheduled) one: /jobs/new and /jobs/<id>/edit.

Both read the form's text (webapp/shared/job_form.py) and leave every check of the values to the producer:
a new job is enqueued by `enqueue` itself, an edit goes through worker/core/features/job_edit.py, which runs
the same checks (producer.build_spec) and a compare-and-set on what the form showed. Each is an admin's POST
with the CSRF token (webapp/auth.py), confirmed first with the database and what will happen, and written
to the audit trail (an edit with its changes). A refusal shows the form again with the message and the
operator's own text: nothing changed, nothing typed is lost.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from flask import Blueprint, abort, flash, make_response, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from skiplock.core.errors import EnqueueError
from skiplock.core.features import job_edit
from skiplock.core.producer import build_spec, enqueue
from skiplock.webapp import db, filters
from skiplock.webapp.shared import job_form
from skiplock.webapp.shared.database_name import database_name
from skiplock.webapp.shared.job_form import JobForm, JobFormError
from skiplock.webapp.web import audit, confirm_page, confirmed

bp = Blueprint("job_edit", __name__, url_prefix="/jobs")

# A refusal's HTTP status: the operator's input was wrong (400), or the job moved under them (409).
BAD_INPUT, CONFLICT = 400, 409
# The fields that carry what the edit form showed (the compare-and-set's "seen").
SEEN_FIELDS = ("seen_queue", "seen_priority", "seen_run_at", "seen_digest", "seen_attempts", "shown_run_at")


# A static segment: Werkzeug prefers this rule over the jobs blueprint's /<job_id>.
@bp.route("/new", methods=["GET", "POST"])
def new() -> ResponseReturnValue:
    """The form (GET, a queue given by ?queue= filled in), its confirmation, then the enqueue."""
    if request.method == "GET":
        return _form_page(JobForm(queue=request.args.get("queue", "")[:128]), None)
    form = job_form.from_request(request.form)
    try:
        queue, payload, priority, run_at = form.queue, job_form.payload(form.payload), \
            job_form.priority(form.priority), job_form.run_at(form.run_at)
        with db.connection(primary=True) as conn:
            if not confirmed():
                # the producer's checks first: a confirmation is shown only for a job that can be enqueued
                build_spec(queue, payload, priority=priority, run_at=run_at)
                return _confirm_new(form, database_name(conn), run_at)
            with conn.transaction():  # the job and its audit row commit together
                jid = enqueue(queue, payload, conn=conn, priority=priority, run_at=run_at)
                audit("create job", 1, conn=conn, ids=[jid], queue=queue, priority=priority,
                      run_at=run_at.isoformat() if run_at else "now")
    except (JobFormError, EnqueueError) as exc:
        return _form_page(JobForm(**{**form.__dict__, "error": _sentence(exc)}), None, BAD_INPUT)
    flash(f"Job {jid} enqueued on queue {queue}.")
    return redirect(url_for("jobs.show", job_id=jid), 303)


@bp.route("/<job_id>/edit", methods=["GET", "POST"])
def edit(job_id: str) -> ResponseReturnValue:
    """The form filled with the queued job as it is now (GET), its confirmation, then the compare-and-set."""
    jid = filters.required_job_id(job_id)
    if request.method == "GET":
        with db.connection(primary=True) as conn:
            job = job_edit.current(conn, jid)
        if job is None:
            abort(404, f"No job {jid}: it ran, or was purged.")
        if job["status"] != "queued":
            abort(409, f"Job {jid} is {job['status']}: only a queued (ready or scheduled) job can be edited.")
        return _form_page(_filled(job), _seen_fields(job), job_id=jid)
    form = job_form.from_request(request.form)
    carried = [(name, request.form.get(name, "")) for name in SEEN_FIELDS]
    try:
        seen = _seen(dict(carried))
        wanted = job_edit.Fields(form.queue, job_form.priority(form.priority), _wanted_run_at(form, seen),
                                 job_form.payload(form.payload))
        with db.connection(primary=True) as conn:
            if not confirmed():
                return _confirm_edit(jid, form, carried, job_edit.preview(conn, jid, seen, wanted),
                                     database_name(conn))
            with conn.transaction():  # the edit and its audit row commit together
                changes = job_edit.edit_queued(conn, jid, seen, wanted)
                audit("edit job", 1, conn=conn, ids=[jid], changes=changes)
    except (JobFormError, job_edit.JobEditRefused) as exc:
        code = CONFLICT if isinstance(exc, job_edit.JobEditConflict) else BAD_INPUT
        return _form_page(JobForm(**{**form.__dict__, "error": _sentence(exc)}), carried, code, job_id=jid)
    flash(f"Job {jid} saved ({len(changes)} change(s)); the Audit trail has what changed.")
    return redirect(url_for("jobs.show", job_id=jid), 303)


def _sentence(exc: Exception) -> str:
    text = str(exc)
    return text if text.endswith(".") else text + "."


def _filled(job: dict[str, Any]) -> JobForm:
    return JobForm(queue=job["queue"], payload=job_form.pretty(job["payload"]),
                   run_at=job_form.shown_time(job["run_at"]), priority=str(job["priority"]))


def _seen_fields(job: dict[str, Any]) -> list[tuple[str, str]]:
    """What the form showed, carried with it: the compare-and-set's other side."""
    return [("seen_queue", job["queue"]), ("seen_priority", str(job["priority"])),
            ("seen_run_at", job["run_at"].isoformat()), ("seen_digest", job["digest"]),
            ("seen_attempts", str(job["attempts"])), ("shown_run_at", job_form.shown_time(job["run_at"]))]


def _seen(carried: dict[str, str]) -> job_edit.Fields:
    try:
        return job_edit.Fields(carried["seen_queue"], int(carried["seen_priority"]),
                               datetime.fromisoformat(carried["seen_run_at"]), digest=carried["seen_digest"],
                               attempts=int(carried["seen_attempts"]))
    except (KeyError, ValueError):  # a form made by hand, or cut short
        abort(400, "The form lacks what it showed of the job: reload the job's page and edit there.")


def _wanted_run_at(form: JobForm, seen: job_edit.Fields) -> datetime | None:
    # the form shows run_at to the second: the text left as shown means the time the job has, to the microsecond
    if form.run_at.strip() == request.form.get("shown_run_at", "").strip():
        return seen.run_at
    return job_form.run_at(form.run_at)


def _confirm_new(form: JobForm, database: str, run_at: datetime | None) -> ResponseReturnValue:
    when = f"at {job_form.shown_time(run_at)} UTC" if run_at else "as soon as a worker of that queue is free"
    explain = [f"On database {database}: 1 job is enqueued on queue {form.queue}, priority {form.priority.strip()}, "
               f"to run {when}.", "The job and its payload are written to the audit trail."]
    fields = [("queue", form.queue), ("payload", form.payload), ("run_at", form.run_at), ("priority", form.priority)]
    return confirm_page("create-job", f"Enqueue a job on {form.queue}?", explain, url_for("job_edit.new"), fields,
                        "Yes, enqueue it", url_for("job_edit.new", queue=form.queue), danger=False)


def _confirm_edit(jid: int, form: JobForm, carried: list[tuple[str, str]], changes: list[dict[str, Any]],
                  database: str) -> ResponseReturnValue:
    words = [job_form.change_words(c) for c in changes]
    explain = [f"On database {database}: job {jid}, still queued and as you saw it, changes in {len(changes)} "
               f"place(s): " + "; ".join(words) + ".",
               "If a worker claims it or anyone changes it before you confirm, nothing is saved and you are told. "
               "The changes are written to the audit trail."]
    fields = [("queue", form.queue), ("payload", form.payload), ("run_at", form.run_at),
              ("priority", form.priority), *carried]
    return confirm_page("edit-job", f"Save the changes to job {jid}?", explain, url_for("job_edit.edit", job_id=jid),
                        fields, "Yes, save them", url_for("jobs.show", job_id=jid), danger=False)


def _form_page(form: JobForm, seen: list[tuple[str, str]] | None, code: int = 200,
               job_id: int | None = None) -> ResponseReturnValue:
    return make_response(render_template("jobs/job_form.html", form=form, seen=seen, job_id=job_id), code)
