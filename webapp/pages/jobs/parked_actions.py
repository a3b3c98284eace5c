"""The job page's actions on a parked job: "wake now" for a sleeping one, "send signal" for a waiting one.

Each asks first, saying on which database, how many jobs it changes and what happens next, then calls the
core (the transition table's "wake", skiplock.signal) in one transaction with its audit row.
Admin only, like every console POST (webapp/auth.py answers 403 to a read-only login before this runs).
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
from flask import Blueprint, flash, g, redirect, request, url_for
from flask.typing import ResponseReturnValue
from psycopg.rows import dict_row

from skiplock.core import transitions
from skiplock.core.durable import service
from skiplock.core.durable.signals import signal
from skiplock.webapp import db, filters
from skiplock.webapp.queries import parked_queries
from skiplock.webapp.web import audit, confirm_page, confirmed

bp = Blueprint("parked_actions", __name__, url_prefix="/jobs")

MAX_PAYLOAD = 10_000  # characters of JSON an operator may send with a signal



# Static last segments: Werkzeug prefers these rules over the jobs blueprint's /<job_id>/<action>.
@bp.route("/<job_id>/wake-now", methods=["POST"])
def wake_now(job_id: str) -> ResponseReturnValue:
    jid = filters.required_job_id(job_id)
    back = url_for("jobs.show", job_id=jid)
    with db.connection() as conn:
        if not confirmed():
            return _confirm_wake(conn, jid, back)
        with conn.transaction():  # the wake and its audit row commit together
            woken = transitions.BY_ACTION["wake"].apply(conn, [jid], f"console:{g.get('user') or 'anonymous'}")
            audit("wake parked job", len(woken), conn=conn, ids=[jid])
    if woken:
        flash(f"Job {jid} woken: it is ready and runs its handler again from the top, skipping its finished steps.")
    else:
        flash(f"Job {jid} was not changed: it is not parked (any more).", "error")
    return redirect(back, 303)


def _confirm_wake(conn: psycopg.Connection, jid: int, back: str) -> ResponseReturnValue:
    on = service.parked_on(conn, jid)
    action = url_for("parked_actions.wake_now", job_id=jid)
    if on is None:
        return confirm_page("wake", f"Job {jid} is not parked", [
            "It woke, finished or was cancelled meanwhile: there is nothing to wake. Its page shows where it is now."],
            action, [], "Wake now", back, possible=False)
    if on["key"] is not None:
        what = (f"It waits for the signal {on['key']!r}. Woken without it, its handler runs again and parks again "
                "on the same key at once: to give it what it waits for, use \"send signal\" instead.")
    else:
        what = (f"It sleeps ({on['sleep']!r}) until {on['wake_at']:%Y-%m-%d %H:%M:%S %Z}. Woken now, its handler "
                "runs again from the top and skips its finished steps; the sleep itself parks it again until "
                "its stored time, unless the handler moved past it.")
    explain = [f"1 job, job {jid} of queue {on['queue']}, goes from parked to ready now.",
               what, "It spends no attempt. The action is written to the audit trail."]
    return confirm_page("wake", f"Wake job {jid} now?", explain, action, [], f"Yes, wake job {jid}", back,
                        danger=False)


@bp.route("/<job_id>/send-signal", methods=["POST"])
def send_signal(job_id: str) -> ResponseReturnValue:
    jid = filters.required_job_id(job_id)
    back = url_for("jobs.show", job_id=jid)
    text = (request.form.get("payload") or "").strip() or "null"
    with db.connection() as conn:
        on = service.parked_on(conn, jid)
        key = request.form.get("key") or (on["key"] if on else None)
        if not key or len(key) > filters.MAX_TEXT:
            flash(f"Job {jid} waits for no signal (any more): nothing was sent.", "error")
            return redirect(back, 303)
        payload, problem = _payload(text)
        if problem:
            flash(problem, "error")
            return redirect(back, 303)
        if not confirmed():
            return _confirm_signal(conn, jid, key, text, back)
        with conn.transaction():  # the signal, the jobs it wakes and its audit row commit together
            woke = signal(key, payload, conn=conn)
            audit("send signal", woke, conn=conn, ids=[jid], key=key)
    flash(f"Signal {key!r} sent: {woke} parked job(s) woken." if woke else
          f"Signal {key!r} woke no job: it had been sent already (the first signal of a key wins), or no job "
          "waits for it any more.", "message" if woke else "error")
    return redirect(back, 303)


def _payload(text: str) -> tuple[Any, str | None]:
    """The operator's JSON payload, or why it cannot be sent."""
    if len(text) > MAX_PAYLOAD:
        return None, f"The payload must be at most {MAX_PAYLOAD:,} characters of JSON."
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, f"The payload is not JSON ({exc.msg} at character {exc.pos + 1}): nothing was sent."


def _confirm_signal(conn: psycopg.Connection, jid: int, key: str, text: str, back: str) -> ResponseReturnValue:
    with conn.cursor(row_factory=dict_row) as cur:
        state: Any = cur.execute(parked_queries.KEY_STATE, {"key": key}).fetchone()
    action = url_for("parked_actions.send_signal", job_id=jid)
    fields = [("key", key), ("payload", text)]
    if state["sent_at"] is not None:
        return confirm_page("signal", f"Signal {key!r} was already sent", [
            f"The signal {key!r} was sent at {state['sent_at']:%Y-%m-%d %H:%M:%S %Z} with "
            f"the payload {state['payload']}. The first signal of a key wins: another one changes nothing and "
            "wakes no job. A job that waits for the key receives that payload at once."],
            action, fields, "Send signal", back, possible=False)
    waiting = int(state["waiting"])
    queues = ", ".join(state["queues"] or [])
    explain = [f"The signal {key!r} with the payload {text[:200]} wakes {waiting} parked "
               f"job(s) now{f' (queue {queues})' if queues else ''}; each runs its handler again from the top, "
               "and its job.wait_for returns this payload.",
               "The signal is kept (SKIPLOCK_SIGNAL_RETENTION): a job that waits for this key later receives the "
               "payload at once. A signal cannot be taken back. The action is written to the audit trail."]
    return confirm_page("signal", f"Send signal {key!r}?", explain, action, fields,
                        f"Yes, send it and wake {waiting} job(s)", back)
