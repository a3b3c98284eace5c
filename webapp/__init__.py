"""The skiplock operator console: a Flask app factory with one blueprint per area.

Production runs it under gunicorn (`gunicorn 'skiplock.webapp:create_app()'`, see Procfile); development
runs `skiplock web`; `mount(app, "/admin/jobs", authorize=...)` serves it inside a host Flask app.
Every action calls the queue core in `worker/`; the console's own SQL only reads. The factory is in
webapp/app.py, mount() in webapp/mount.py: this module is their public path.
The pages are in webapp/pages/ (one module per area), their read-only SQL in webapp/queries/, what
they share in webapp/shared/ and at webapp/'s top (auth, db, filters, settings, web).
"""

from skiplock.webapp.app import BLUEPRINTS, create_app
from skiplock.webapp.mount import mount

__all__ = ["BLUEPRINTS", "create_app", "mount"]
