"""The skiplock operator console: a Flask app factory with one blueprint per area.

Production runs it under gunicorn (`gunicorn 'skiplock.webapp:create_app()'`, see Procfile); development
runs `skiplock web`; `mount(app, "/admin/jobs", authorize=...)` serves it inside a host Flask app.
Every action calls the queue core in `worker/`; the console's own SQL only reads. The factory is in
webapp/app.py, mount() in webapp/mount.py: this module is their public path.
"""

from skiplock.webapp.app import BLUEPRINTS, create_app
from skiplock.webapp.mount import mount

__all__ = ["BLUEPRINTS", "create_app", "mount"]
