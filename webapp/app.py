"""The console's app factory, `create_app()`: the Flask app with one blueprint per area.

`skiplock.webapp` re-exports it (the public path, `gunicorn 'skiplock.webapp:create_app()'`). It lives in
a module of its own so that webapp/mount.py, which builds consoles with it, imports it without importing
the package that exports mount() itself (that was the package's one import loop).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from flask import Flask

from skiplock.core.plumbing.logs import configure_logging
from skiplock.core.plumbing.resources import static_dir, templates_dir
from skiplock.webapp import auth, db, web
from skiplock.webapp.pages import (
    audit,
    batches,
    changed,
    dead,
    health_alerts,
    healthz,
    ops,
    overview,
    parked,
    queues,
    recurring,
    running,
    runtimes,
    search,
    workers,
    workflows,
)
from skiplock.webapp.pages.jobs import cancel, create_edit, detail, edit_retry, parked_actions, stack
from skiplock.webapp.settings import check_config, session_key, web_config

__all__ = ["BLUEPRINTS", "create_app"]

log = logging.getLogger("skiplock.console")

# The areas of the console, one blueprint each, imported here by name so that what the console serves is
# read in one place. The job page has four: the page itself, a running job's Cancel, a dead job's
# "Edit and retry", a parked job's "wake now" and "send signal", and a running job's "Show stack". The
# /databases/ page is not among them: only a console over several databases has it (webapp/multi_app.py,
# mount(databases=...)).
PAGES = (overview.bp, queues.bp, running.bp, dead.bp, detail.bp, workers.bp, recurring.bp, ops.bp,
         cancel.bp, audit.bp, workflows.bp, batches.bp, runtimes.bp, changed.bp, search.bp, edit_retry.bp,
         parked.bp, parked_actions.bp, stack.bp, health_alerts.bp,
         create_edit.bp)
# Their names, the public list of the console's areas.
BLUEPRINTS = tuple(page.name for page in PAGES)


def create_app(test_config: Mapping[str, Any] | None = None) -> Flask:
    """Build the console; config comes from the environment, then `test_config` overrides it."""
    app = Flask(__name__, static_folder=str(static_dir()), template_folder=str(templates_dir()))
    app.config.update(web_config())
    if test_config:
        app.config.update(test_config)
    check_config(app.config)
    if not logging.getLogger().handlers:
        # under gunicorn nobody configured logging yet: without this the audit log would be lost
        configure_logging(app.config.get("LOG_FORMAT", "text"), app.config.get("LOG_LEVEL", "INFO"))
    if not app.config.get("SECRET_KEY"):
        app.config["SECRET_KEY"] = session_key(app.config)
    # Flask's defaults hold these keys (HttpOnly True, SameSite None): setdefault would never set SameSite.
    # Lax: a cross-site page cannot send a form with the console's cookie; links to the console still log in
    if app.config.get("SESSION_COOKIE_SAMESITE") is None and "SESSION_COOKIE_SAMESITE" not in (test_config or {}):
        app.config["SESSION_COOKIE_SAMESITE"] = "Lax"
    if not app.config["AUTH"]:
        log.warning("SKIPLOCK_WEB_AUTH=off: the console is open to anyone who can reach it")

    db.init_app(app)
    auth.init_app(app)
    web.init_app(app)
    app.add_url_rule("/healthz", "healthz", healthz.healthz)
    for page in PAGES:
        app.register_blueprint(page)
    return app
