"""`skiplock web` and the console's part of `skiplock dev`."""

from __future__ import annotations

from skiplock.tools.cli import COMMANDS, main
from skiplock.tools.web_cli import dev_console


def test_web_command_refuses_to_start_without_credentials(db_url, monkeypatch, capsys):
    for name in ("SKIPLOCK_WEB_USER", "SKIPLOCK_WEB_PASSWORD", "SKIPLOCK_WEB_PASSWORD_HASH", "SKIPLOCK_WEB_AUTH"):
        monkeypatch.delenv(name, raising=False)
    assert main(["web", "--port", "1"]) == 2
    err = capsys.readouterr().err
    assert "no credentials" in err and "SKIPLOCK_WEB_PASSWORD" in err
    assert "web" in COMMANDS


def test_dev_generates_a_password_and_prints_how_to_log_in(capsys):
    env = {"PORT": "5123", "DATABASE_URL": "postgresql://x@127.0.0.1/db"}
    cmd = dev_console(env)
    out = capsys.readouterr().out
    assert env["SKIPLOCK_WEB_USER"] == "admin" and len(env["SKIPLOCK_WEB_PASSWORD"]) >= 12
    assert "http://127.0.0.1:5123/" in out and env["SKIPLOCK_WEB_PASSWORD"] in out
    assert "gunicorn 'skiplock.webapp:create_app()'" in cmd and "127.0.0.1:5123" in cmd
    kept = {"PORT": "5000", "SKIPLOCK_WEB_USER": "me", "SKIPLOCK_WEB_PASSWORD": "mine"}
    dev_console(kept)
    assert kept["SKIPLOCK_WEB_PASSWORD"] == "mine" and "mine" not in capsys.readouterr().out
