"""The skiplock operator console: a Flask app factory with one blueprint per area.

Production runs it under gunicorn (`gunicorn 'skiplock.webapp:create_app()'`, see Procfile); development
runs `skiplock web`; `mount(app, "/admin/jobs", authorize=...)` serves it inside a host Flask app.
Every action calls the queue core in `worker/`; the console's own SQL only reads. The factory is in
webapp/app.py (the public create_app, which also serves SKIPLOCK_DATABASES, in webapp/multi_app.py),
mount() in webapp/mount.py: this module is their public path.
The pages are in webapp/pages/ (one module per area), their read-only SQL in webapp/queries/, what
they share in webapp/shared/ and at webapp/'s top (auth, db, filters, settings, web).
"""

from skiplock.webapp.app import BLUEPRINTS
from skiplock.webapp.mount import mount
from skiplock.webapp.multi_app import create_app

__all__ = ["BLUEPRINTS", "create_app", "mount"]
