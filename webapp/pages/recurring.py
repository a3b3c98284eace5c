"""Recurring schedules: every schedule with its cron in plain words, next fires, recent runs and a 24-hour
timeline of fires; pause, resume and run now for all; create, edit, backfill and delete for those made at
runtime (code-defined ones are changed in code). Every change goes through skiplock.services (schedules,
recurring_defs) and is audited."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from flask import Blueprint, abort, flash, redirect, url_for
from flask.typing import ResponseReturnValue
from psycopg.rows import dict_row

from skiplock.core.errors import ConfigError
from skiplock.services import recurring_defs as recurring
from skiplock.services import schedule_words, schedules
from skiplock.webapp import db, filters
from skiplock.webapp.queries import page_queries
from skiplock.webapp.web import audit, confirm_page, confirmed, page

bp = Blueprint("recurring", __name__, url_prefix="/recurring")
# Schedules per page: the timeline and next fires are computed per shown schedule.
PAGE_SIZE = 200


def _view(s: schedules.Schedule, now: datetime, hour: datetime) -> dict[str, Any]:
    """What the page shows of one schedule beside its row: words, next fires, fires per hour."""
    try:
        return {"words": schedule_words.describe(s.kind, s.schedule, s.timezone),
                "next": schedule_words.next_fires(s.kind, s.schedule, s.timezone, now),
                "timeline": schedule_words.fires_per_hour(s.kind, s.schedule, s.timezone, hour),
                "minutes": schedule_words.fires_per_minute(s.kind, s.schedule, s.timezone, hour)}
    except ValueError as exc:  # a row edited by hand into something invalid: say so, show the rest
        return {"words": f"invalid: {exc}", "next": [], "timeline": (0,) * 24, "minutes": ()}


@bp.route("/")
def index() -> ResponseReturnValue:
    """Schedules by name, PAGE_SIZE at a time (from recurring_schedules)."""
    after = filters.arg("after") or ""
    with db.connection() as conn:
        shown = schedules.list(after=after, limit=PAGE_SIZE + 1, conn=conn)
        with conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(page_queries.RECURRING_RUNS, {"per": page_queries.RECENT_RUNS_PER_SCHEDULE}).fetchall()
    more = len(shown) > PAGE_SIZE
    shown = shown[:PAGE_SIZE]
    runs: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        runs.setdefault(row["name"], []).append(row)
    now = datetime.now(UTC)
    hour = now.replace(minute=0, second=0, microsecond=0)
    views = {s.name: _view(s, now, hour) for s in shown}
    live = [views[s.name]["timeline"] for s in shown if s.enabled and s.active]
    minutes = schedule_words.busiest_minutes(
        (s.name, views[s.name]["minutes"]) for s in shown if s.enabled and s.active)
    return page("recurring/recurring.html", "recurring/_recurring.html", schedules=shown, runs=runs, views=views,
                hours=[hour + timedelta(hours=h) for h in range(24)],
                busiest=[(hour + timedelta(hours=h), n) for h, n in schedule_words.busiest_hours(live)],
                busiest_minutes=[(hour + timedelta(minutes=m), n, names) for m, n, names in minutes],
                next_after=shown[-1].name if more else None,
                last_died={name: last_outcome(r) == "dead" for name, r in runs.items()})


def last_outcome(runs: list[dict[str, Any]]) -> str | None:
    """The outcome of a schedule's newest run that has one (queued and running runs have none yet);
    a run whose job is gone finished without a dead letter."""
    for run in runs:  # newest first
        if run["status"] in ("queued", "running"):
            continue
        return run["status"] or "gone"
    return None


def _form_settings() -> dict[str, Any]:
    """The create/edit form's fields that were filled in; ConfigError for a payload that is not JSON."""
    given: dict[str, Any] = {}
    for field in ("queue", "timezone", "tenant"):
        if value := (filters.arg(field) or "").strip():
            given[field] = value
    when = (filters.arg("when") or "").strip()
    if when:
        given["every" if filters.arg("kind") == "interval" else "cron"] = when
    payload = (filters.arg("payload") or "").strip()
    if payload:
        try:
            given["payload"] = json.loads(payload)
        except ValueError as exc:
            raise ConfigError(f"payload is not valid JSON: {exc}") from None
    return given


@bp.route("/new", methods=["POST"])
def create() -> ResponseReturnValue:
    """Make a runtime schedule from the page's form."""
    name = (filters.arg("name") or "").strip()

    def change(conn: psycopg.Connection) -> str:
        given = _form_settings()
        made = schedules.create(name, given.pop("queue", ""), given.pop("payload", None), conn=conn, **given)
        audit("create schedule", 1, conn=conn, schedule=name, **_form_settings())
        return f"Schedule {name} created; it fires {schedule_words.describe(made.kind, made.schedule, made.timezone)}."

    return _write("Schedule not created", change)


def _write(failed: str, change: Callable[[psycopg.Connection], str]) -> ResponseReturnValue:
    """Run `change` (a schedule's change and its audit row) in one transaction and flash the sentence it
    returns; a ConfigError flashes `failed` with its reason, and nothing is written. Back to the page."""
    try:
        with db.connection() as conn, conn.transaction():  # the change and its audit row commit together
            done = change(conn)
    except ConfigError as exc:  # a clear message, and nothing written
        flash(f"{failed}: {exc}", "error")
    else:
        flash(done)
    return redirect(url_for("recurring.index"), 303)


@bp.route("/<path:name>/edit", methods=["GET"])
def edit_form(name: str) -> ResponseReturnValue:
    """A runtime schedule's change, backfill and delete forms (not on the live page, which refreshes)."""
    with db.connection() as conn:
        found = schedules.get(name, conn=conn)
    if found is None:
        abort(404, f"no schedule named {name[:200]!r}")
    if found.origin != "runtime":
        abort(404, f"schedule {name[:200]!r} is defined in code: change it there")
    view = _view(found, datetime.now(UTC), datetime.now(UTC).replace(minute=0, second=0, microsecond=0))
    return page("recurring/edit.html", "recurring/edit.html", s=found, words=view["words"],
                next=view["next"] if found.enabled else [])


@bp.route("/<path:name>/edit", methods=["POST"])
def edit(name: str) -> ResponseReturnValue:
    """Change a runtime schedule's settings from its row's form (blank fields stay as they are)."""

    def change(conn: psycopg.Connection) -> str:
        given = _form_settings()
        schedules.update(name, conn=conn, **given)
        audit("edit schedule", 1, conn=conn, schedule=name, **given)
        return f"Schedule {name} changed; it is planned again from now."

    return _write(f"Schedule {name} not changed", change)


@bp.route("/<path:name>/backfill", methods=["POST"])
def backfill(name: str) -> ResponseReturnValue:
    """Enqueue the slots of the last N hours that never ran (each once)."""
    try:
        hours = float(filters.arg("hours") or "")
        if not 0 < hours <= 24 * 31:
            raise ValueError
    except ValueError:
        flash("Backfill needs a number of hours from 0 to 744.", "error")
        return redirect(url_for("recurring.index"), 303)
    now = datetime.now(UTC)
    if not confirmed():
        return _confirm_backfill(name, hours, now)

    def change(conn: psycopg.Connection) -> str:
        ids = schedules.backfill(name, now - timedelta(hours=hours), now, conn=conn)
        audit("backfill schedule", len(ids), conn=conn, schedule=name, hours=hours)
        return f"Schedule {name}: {len(ids)} missed slot(s) enqueued."

    return _write(f"Schedule {name} not backfilled", change)


def _confirm_backfill(name: str, hours: float, now: datetime) -> ResponseReturnValue:
    """How many jobs the backfill would enqueue: the backfill itself, run and rolled back."""
    back = url_for("recurring.edit_form", name=name)
    try:
        with db.connection() as conn, conn.transaction(force_rollback=True):
            count = len(schedules.backfill(name, now - timedelta(hours=hours), now, conn=conn))
    except ConfigError as exc:
        flash(f"Schedule {name} not backfilled: {exc}", "error")
        return redirect(url_for("recurring.index"), 303)
    return confirm_page("backfill", f"Backfill schedule {name}: enqueue {count} job(s)?", [
        f"{count} slot(s) of the last {hours:g} hour(s) never ran: each becomes one job, due at once, and runs as "
        "soon as a worker is free. Slots that ran (or were backfilled before) are not enqueued again."],
        url_for("recurring.backfill", name=name), [("hours", f"{hours:g}")],
        f"Yes, enqueue {count} job(s)", back, danger=False, possible=count > 0)


@bp.route("/<path:name>/delete", methods=["POST"])
def delete(name: str) -> ResponseReturnValue:
    """Delete a runtime schedule (its pending job is withdrawn), after a confirmation."""
    if not confirmed():
        return confirm_page("delete", f"Delete schedule {name}?", [
            f"Schedule {name} is deleted for good: it fires no more, and its pending job (if one is queued) is "
            "withdrawn. Jobs of it that already ran or run now are not touched."],
            url_for("recurring.delete", name=name), [], f"Yes, delete {name}", url_for("recurring.edit_form",
                                                                                        name=name))
    try:
        with db.connection() as conn, conn.transaction():
            deleted = schedules.delete(name, conn=conn)
            audit("delete schedule", 1 if deleted else 0, conn=conn, schedule=name)
    except ConfigError as exc:
        flash(f"Schedule {name} not deleted: {exc}", "error")
    else:
        flash(f"Schedule {name} deleted." if deleted else f"No schedule named {name}.",
              "message" if deleted else "error")
    return redirect(url_for("recurring.index"), 303)


@bp.route("/<path:name>/<action>", methods=["POST"])
def act(name: str, action: str) -> ResponseReturnValue:
    """Pause, resume or run one schedule now, after a confirmation."""
    calls = {"pause": recurring.pause_schedule, "resume": recurring.resume_schedule,
             "run": recurring.run_schedule_now}
    if action not in calls:
        abort(404, f"unknown action {action[:40]!r}")
    if not confirmed():  # each stops or starts work: say what first
        return _confirm_act(name, action)
    with db.connection() as conn, conn.transaction():  # the change and its audit row commit together
        result = calls[action](conn, name)
        if action == "run":
            audit("run schedule now", 1 if result is not None else 0, conn=conn, schedule=name, job_id=result)
        else:
            audit(f"{action} schedule", 0, conn=conn, schedule=name, changed=result)
    if action == "run":
        if result is None:
            flash(f"Schedule {name} did not enqueue a job (unknown schedule?).", "error")
        else:
            flash(f"Schedule {name} enqueued job {result}.")
    else:
        flash(f"Schedule {name} {action}d." if result else f"Schedule {name} was not changed.",
              "message" if result else "error")
    return redirect(url_for("recurring.index"), 303)


def _confirm_act(name: str, action: str) -> ResponseReturnValue:
    """What pausing, resuming or running a schedule now does, with its queue and its next fires."""
    with db.connection() as conn:
        found = schedules.get(name, conn=conn)
    back = url_for("recurring.index")
    target = url_for("recurring.act", name=name, action=action)
    if found is None:
        return confirm_page(action, f"No schedule named {name}", ["It was deleted meanwhile: nothing will change."],
                            target, [], action, back, possible=False)
    now = datetime.now(UTC)
    view = _view(found, now, now.replace(minute=0, second=0, microsecond=0))
    fires = ", ".join(f"{t:%Y-%m-%d %H:%M %Z}" for t in view["next"]) or "none"
    said = {
        "pause": (f"Pause schedule {name}?", [
            f"It stops firing until resumed: no new job of queue {found.queue} comes from it (its next fires were "
            f"{fires}), "
            "and its pending job, if one is queued, is cancelled. A run already going is not stopped."],
            f"Yes, pause {name}", True),
        "resume": (f"Resume schedule {name}?", [
            f"It fires again {view['words']}, from its next slot after now (missed slots are not caught up): "
            f"1 job of queue {found.queue} per fire."], f"Yes, resume {name}", False),
        "run": (f"Run schedule {name} now?", [
            f"1 job of queue {found.queue} is enqueued now, besides its planned fires ({fires}), and runs as soon "
            "as a worker is free."], f"Yes, enqueue 1 job of {name}", False),
    }
    title, explain, button, danger = said[action]
    return confirm_page(action, title, [*explain, "The action is written to the audit trail."], target, [], button,
                        back, danger=danger)
