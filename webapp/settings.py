"""The console's own settings: credentials, roles and the session key, read from the environment.

Auth is on by default. Without an admin user and password (or password hash) the console refuses
to start and says how to set them, unless SKIPLOCK_WEB_AUTH=off is set on purpose.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from skiplock.core.errors import ConfigError
from skiplock.core.plumbing.config import load_settings

HOW_TO = (
    "Set SKIPLOCK_WEB_USER and SKIPLOCK_WEB_PASSWORD (or SKIPLOCK_WEB_PASSWORD_HASH, made with "
    "python -c \"from werkzeug.security import generate_password_hash as g; print(g('...'))\"). "
    "Optionally add SKIPLOCK_WEB_READONLY_USER and SKIPLOCK_WEB_READONLY_PASSWORD[_HASH] for a "
    "read-only login. To run without auth on a trusted machine, set SKIPLOCK_WEB_AUTH=off."
)


@dataclass(frozen=True)
class Account:
    """One login: its role and either a plaintext password or a werkzeug hash."""

    user: str
    role: str  # 'admin' | 'readonly'
    password: str | None = None
    password_hash: str | None = None


def _account(env: Mapping[str, str], prefix: str, role: str) -> Account | None:
    user = env.get(f"{prefix}_USER", "").strip()
    password = env.get(f"{prefix}_PASSWORD") or None
    password_hash = env.get(f"{prefix}_PASSWORD_HASH") or None
    if not user and not password and not password_hash:
        return None
    if not user or not (password or password_hash):
        raise ConfigError(f"{prefix}_USER needs {prefix}_PASSWORD or {prefix}_PASSWORD_HASH (and the other "
                          f"way round). {HOW_TO}")
    return Account(user, role, password, password_hash)


def web_config(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Flask config keys for the console, from `env` (default os.environ)."""
    env = os.environ if env is None else env
    settings = load_settings(env)
    auth_raw = env.get("SKIPLOCK_WEB_AUTH", "on").strip().lower()
    if auth_raw not in ("on", "off"):
        raise ConfigError(f"SKIPLOCK_WEB_AUTH must be on or off, got {auth_raw!r}")
    accounts = [a for a in (_account(env, "SKIPLOCK_WEB", "admin"),
                            _account(env, "SKIPLOCK_WEB_READONLY", "readonly")) if a]
    return {
        "DATABASE_URL": settings.database_url,
        # a standby for the read-only pages; actions and login counters stay on DATABASE_URL
        "READ_URL": env.get("SKIPLOCK_CONSOLE_READ_URL") or None,
        "POOL_SIZE": settings.pool_size,
        "LOG_FORMAT": settings.log_format,
        "LOG_LEVEL": settings.log_level,
        "AUTH": auth_raw == "on",
        "ACCOUNTS": accounts,
        "SECRET_KEY": env.get("SKIPLOCK_SECRET_KEY") or None,
        "METRICS_TOKEN": env.get("SKIPLOCK_METRICS_TOKEN") or None,
        "BEHIND_PROXY": _on_off(env, "SKIPLOCK_BEHIND_PROXY", "off"),
        "SESSION_IDLE_MINUTES": _positive_int(env, "SKIPLOCK_SESSION_IDLE_MINUTES", 60),
        "LOGIN_MAX_FAILURES": _positive_int(env, "SKIPLOCK_LOGIN_MAX_FAILURES", 5),
        "LOGIN_LOCKOUT_SECONDS": _positive_int(env, "SKIPLOCK_LOGIN_LOCKOUT_SECONDS", 300),
    }


def _on_off(env: Mapping[str, str], name: str, default: str) -> bool:
    raw = env.get(name, default).strip().lower()
    if raw not in ("on", "off"):
        raise ConfigError(f"{name} must be on or off, got {raw!r}")
    return raw == "on"


def _positive_int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, str(default)).strip()
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigError(f"{name} must be a whole number of at least 1, got {raw!r}")
    return int(raw)


def check_config(config: Mapping[str, Any]) -> None:
    """Refuse to start without what the console needs, with a message that says how to fix it."""
    if not config.get("DATABASE_URL"):
        raise ConfigError("DATABASE_URL is not set: the console needs the queue's database. "
                          "e.g. DATABASE_URL=postgresql://user@localhost:5432/app")
    accounts = config.get("ACCOUNTS") or []
    # Mounted in a host app, the host's authorize hook decides; no accounts of our own are needed.
    if config.get("AUTH", True) and not config.get("AUTH_HOOK") and not any(a.role == "admin" for a in accounts):
        raise ConfigError(f"the console has no credentials, so it will not start. {HOW_TO}")
    if len({a.user for a in accounts}) != len(accounts):
        raise ConfigError("SKIPLOCK_WEB_USER and SKIPLOCK_WEB_READONLY_USER must differ")


def session_key(config: Mapping[str, Any]) -> str:
    """SKIPLOCK_SECRET_KEY, or one derived from the credentials so every gunicorn worker agrees.

    Deriving keeps sessions valid across processes without another required setting, and a
    password change logs everyone out. scrypt makes guessing the password from a cookie slow;
    production should still set SKIPLOCK_SECRET_KEY (the README says so).
    """
    if config.get("SECRET_KEY"):
        return str(config["SECRET_KEY"])
    accounts = config.get("ACCOUNTS") or []
    material = "|".join(f"{a.user}:{a.password or ''}:{a.password_hash or ''}" for a in accounts)
    if not material:
        return secrets.token_hex(32)  # auth off: nothing secret to derive from
    material += "|" + str(config.get("DATABASE_URL") or "")
    return hashlib.scrypt(material.encode(), salt=b"skiplock-console-session", n=2**14, r=8, p=1).hex()
