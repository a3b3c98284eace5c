"""`skiplock web` (the console's development server) and the console's place in `skiplock dev`."""

from __future__ import annotations

import argparse
import os
import secrets
import shlex
import sys

from skiplock.tools.commands import command


def _web_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=None, help="port (default $PORT or 5000)")
    p.add_argument("--debug", action="store_true", help="Flask debug mode with reloader (never in production)")


@command("web", "run the operator console with Flask's development server (production: gunicorn, see Procfile)",
         _web_args)
def _web(args: argparse.Namespace) -> int:
    from skiplock.core.plumbing.logs import configure_logging
    from skiplock.webapp import create_app

    configure_logging()
    # with SKIPLOCK_DATABASES, the console over all of them (the same factory as under gunicorn);
    # raises ConfigError (one clear line, exit 2) without credentials
    app = create_app()
    port = args.port or int(os.environ.get("PORT", "5000"))
    print(f"skiplock web: console on http://{args.host}:{port}/", flush=True)
    app.run(host=args.host, port=port, debug=args.debug, use_reloader=args.debug)
    return 0


def dev_console(env: dict[str, str]) -> str:
    """The console's process for `skiplock dev`: gunicorn on $PORT, with a generated login.

    Mutates `env` (the child environment) to add SKIPLOCK_WEB_USER/PASSWORD when none are set,
    and prints the URL and the credentials so the newcomer can log in.
    """
    if not env.get("SKIPLOCK_WEB_PASSWORD") and not env.get("SKIPLOCK_WEB_PASSWORD_HASH") \
            and env.get("SKIPLOCK_WEB_AUTH", "on") != "off":
        env["SKIPLOCK_WEB_USER"] = env.get("SKIPLOCK_WEB_USER") or "admin"
        env["SKIPLOCK_WEB_PASSWORD"] = secrets.token_urlsafe(12)
        login = f"user {env['SKIPLOCK_WEB_USER']}, password {env['SKIPLOCK_WEB_PASSWORD']} (generated for this run)"
    elif env.get("SKIPLOCK_WEB_AUTH", "on") == "off":
        login = "no login (SKIPLOCK_WEB_AUTH=off)"
    else:
        login = f"user {env.get('SKIPLOCK_WEB_USER', '?')} with your SKIPLOCK_WEB_PASSWORD"
    port = env.get("PORT", "5000")
    print(f"skiplock dev: console on http://127.0.0.1:{port}/ - log in with {login}", flush=True)
    python = shlex.quote(sys.executable)
    # one gthread worker is plenty for one operator; the Procfile line is the production shape
    return (f"{python} -m gunicorn 'skiplock.webapp:create_app()' --worker-class gthread --workers 1 --threads 4 "
            f"--bind 127.0.0.1:{int(port)} --access-logfile -")
