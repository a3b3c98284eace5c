"""The Health page's "Send a test alert" (worker/services/alerts.py's send_test, through Apprise on
SKIPLOCK_ALERT_URLS); the panel it sits in is webapp/shared/alerts_panel.py's. The test is an admin's POST
with the CSRF token, confirmed first (it messages real people), and written to the audit trail with
whether it was delivered.
"""

from __future__ import annotations

from flask import Blueprint, flash, g, redirect, url_for
from flask.typing import ResponseReturnValue

from skiplock.core.errors import ConfigError
from skiplock.core.plumbing.config import load_settings
from skiplock.services.alerts import AlertService
from skiplock.webapp import db
from skiplock.webapp.shared.alerts_panel import alert_settings, destinations
from skiplock.webapp.shared.database_name import database_name
from skiplock.webapp.web import audit, confirm_page, confirmed

bp = Blueprint("health_alerts", __name__, url_prefix="/health")


@bp.route("/test-alert", methods=["POST"])
def test_alert() -> ResponseReturnValue:
    """Confirm, then send one test message to every destination; say whether it was delivered."""
    alerts, problem = alert_settings()
    back = url_for("ops.health") + "#alerts"
    action = url_for("health_alerts.test_alert")
    if problem or not alerts.enabled:
        return confirm_page("test-alert", "No alert destination to test", [
            problem or "SKIPLOCK_ALERT_URLS is not set for the console: there is nowhere to send a test alert. "
            "Set it (the same value as the workers') and restart the console."], action, [], "Send a test alert",
            back, possible=False)
    kinds = destinations(alerts)
    if not confirmed():
        with db.connection() as conn:
            database = database_name(conn)
        return confirm_page("test-alert", "Send a test alert?", [
            f"From the console of database {database}, one message titled \"skiplock: test alert\" goes to "
            f"{len(kinds)} destination(s) of SKIPLOCK_ALERT_URLS: {', '.join(kinds)}. Whoever reads them gets it.",
            "It changes no job and no alert rule; it is listed with the last alerts and written to the audit trail."],
            action, [], "Yes, send a test alert", back, danger=False)
    try:
        service = AlertService(lambda: db.connection(primary=True), load_settings(), alerts)
        error = service.send_test(str(g.get("user")))
    except ConfigError as exc:  # Apprise missing, or a URL it cannot use: the worker would refuse it too
        error = str(exc)
    audit("send test alert", 0, destinations=kinds, delivered=error is None, error=error)
    if error is None:
        flash(f"Test alert sent to {len(kinds)} destination(s): check that it arrived.")
    else:
        flash(f"The test alert was not delivered: {error}", "error")
    return redirect(back, 303)
