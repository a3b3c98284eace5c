"""Configuration: one frozen object built from the environment by `load_settings()`.

Every field has a named default and a one-line meaning. A bad value raises ConfigError with a
message that names the variable, the value and what is expected; an unknown SKIPLOCK_* name
gets a "did you mean" suggestion, since a typo'd setting silently ignored is worse than an error.
"""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import psycopg.conninfo

from skiplock.core.errors import ConfigError
from skiplock.core.status import HistoryMode

T = TypeVar("T")


@dataclass(frozen=True)
class Settings:
    """Everything a worker, producer or console process reads from its environment."""

    database_url: str | None = None  # DATABASE_URL: the PostgreSQL database of the queue
    tasks: tuple[str, ...] = ()  # SKIPLOCK_TASKS: modules that register handlers
    queues: tuple[str, ...] = ()  # SKIPLOCK_QUEUES: limit the worker to these queues
    concurrency: int = 10  # SKIPLOCK_CONCURRENCY: handler threads per worker process
    async_concurrency: int = 100  # SKIPLOCK_ASYNC_CONCURRENCY: async handlers awaited at once per worker
    batch_size: int = 50  # SKIPLOCK_BATCH_SIZE: most jobs one claim may take (a batch handler's queue: its batch_size)
    prefetch: int | None = None  # SKIPLOCK_PREFETCH: claimed jobs held for a free slot (auto: sized from timings)
    poll_interval: float = 1.0  # SKIPLOCK_POLL_INTERVAL: seconds between polls when idle
    lease_seconds: float = 30.0  # SKIPLOCK_LEASE_SECONDS: default lease length
    queue_leases: Mapping[str, float] = field(default_factory=dict)  # SKIPLOCK_QUEUE_LEASES: per-queue leases
    heartbeat_interval: float | None = None  # SKIPLOCK_HEARTBEAT_INTERVAL: seconds between lease extensions
    ack_interval: float = 0.005  # SKIPLOCK_ACK_INTERVAL_MS (ms in env): longest an ack waits
    ack_batch: int = 200  # SKIPLOCK_ACK_BATCH: flush once this many results are waiting
    shutdown_grace: float = 30.0  # SKIPLOCK_SHUTDOWN_GRACE: seconds in-flight jobs get on SIGTERM
    reaper_interval: float = 5.0  # SKIPLOCK_REAPER_INTERVAL: seconds between reaper passes
    # SKIPLOCK_VACUUM_DEAD_ROWS: a worker vacuums jobs once it holds this many dead rows (0: never;
    # services/vacuum.py)
    vacuum_dead_rows: int = 20_000
    keep_history: bool = False  # SKIPLOCK_KEEP_HISTORY: keep succeeded rows instead of deleting
    history_retention: float = 7 * 86400.0  # SKIPLOCK_HISTORY_RETENTION: seconds succeeded/failed are kept
    dead_retention: float = 30 * 86400.0  # SKIPLOCK_DEAD_RETENTION: seconds dead jobs are kept
    audit_retention: float = 365 * 86400.0  # SKIPLOCK_AUDIT_RETENTION: seconds operator audit rows are kept
    # SKIPLOCK_STATS_RETENTION: seconds of per-minute job_stats kept (the console charts up to 7 days)
    stats_retention: float = 8 * 86400.0
    max_payload_bytes: int = 1_048_576  # SKIPLOCK_MAX_PAYLOAD_BYTES: largest JSON payload accepted
    # SKIPLOCK_MAX_RESULT_BYTES: largest JSON return value stored (a larger one ends the job dead, saying so)
    max_result_bytes: int = 262_144
    result_ttl: float = 7 * 86400.0  # SKIPLOCK_RESULT_TTL: seconds stored results are kept
    signal_retention: float = 7 * 86400.0  # SKIPLOCK_SIGNAL_RETENTION: seconds a durable job's signal is kept
    # SKIPLOCK_SWEEP_INTERVAL: seconds between passes of the workflow sweeper (stranded waits, missed callbacks)
    sweep_interval: float = 30.0
    default_max_attempts: int = 20  # SKIPLOCK_MAX_ATTEMPTS: max_attempts when enqueue gives none
    backoff_base: float = 1.0  # SKIPLOCK_BACKOFF_BASE: first retry delay in seconds
    backoff_cap: float = 3600.0  # SKIPLOCK_BACKOFF_CAP: longest retry delay in seconds
    pool_size: int = 4  # SKIPLOCK_POOL_SIZE: database connections per process pool
    log_format: str = "text"  # SKIPLOCK_LOG_FORMAT: json for one JSON object per log line
    log_level: str = "INFO"  # SKIPLOCK_LOG_LEVEL: the lowest level logged
    health_port: int | None = None  # SKIPLOCK_HEALTH_PORT: serve worker liveness on this port
    history_mode: str = "delete"  # SKIPLOCK_HISTORY_MODE: delete, keep (in jobs) or partitioned (jobs_history)
    # SKIPLOCK_DIRECT_URL: a URL straight to PostgreSQL (not through a transaction-pooling PgBouncer)
    # for what needs a session: LISTEN and the migrations' advisory lock. Default: DATABASE_URL.
    direct_url: str | None = None
    prepared_statements: bool = True  # SKIPLOCK_PREPARED_STATEMENTS: off behind PgBouncer < 1.21 (transaction mode)
    job_logs: bool = True  # SKIPLOCK_JOB_LOGS: keep what handlers log during a run with the job (0: do not)

    def lease_for(self, queue: str) -> float:
        """Lease length in seconds for jobs of `queue`."""
        return float(self.queue_leases.get(queue, self.lease_seconds))

    @property
    def effective_heartbeat(self) -> float:
        """Seconds between lease extensions; 0 means heartbeats are off."""
        if self.heartbeat_interval is not None:
            return self.heartbeat_interval
        # a third of the shortest lease leaves two missed beats before any lease can expire
        shortest = min([self.lease_seconds, *self.queue_leases.values()])
        return max(shortest / 3.0, 0.05)

    @property
    def history(self) -> HistoryMode:
        """Where succeeded jobs go: delete, keep (stay in jobs) or partitioned (jobs_history)."""
        if self.history_mode == HistoryMode.DELETE and self.keep_history:
            return HistoryMode.KEEP  # SKIPLOCK_KEEP_HISTORY=true alone still means keep
        return HistoryMode(self.history_mode)

    def require_database_url(self) -> str:
        """The DATABASE_URL, or a ConfigError saying how to set it."""
        if not self.database_url:
            raise ConfigError(
                "DATABASE_URL is not set. Set it to a PostgreSQL URL, e.g. "
                "DATABASE_URL=postgresql://user@localhost:5432/app (or run `skiplock dev` for an "
                "embedded database)."
            )
        return self.database_url

    @property
    def session_url(self) -> str:
        """Where session-bound work goes (LISTEN, migrations): SKIPLOCK_DIRECT_URL, else DATABASE_URL."""
        return self.direct_url or self.require_database_url()


# ---- parsing helpers: each turns one env string into a typed value or a clear ConfigError ----


def _number(name: str, raw: str, kind: Callable[[str], T], minimum: float, what: str,
            maximum: float | None = None) -> T:
    try:
        value = kind(raw.strip())
    except ValueError:
        raise ConfigError(f"{name} must be {what}, got {raw!r}") from None
    # float() accepts 'nan' and 'inf': NaN passes every comparison below, and infinity breaks
    # interval arithmetic later (make_interval), so neither is a number of seconds here
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{name} must be {what}, got {raw!r}")
    if value < minimum or (maximum is not None and value > maximum):  # type: ignore[operator]
        raise ConfigError(f"{name} must be {what}, got {raw!r}")
    return value


def _bool(name: str, raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise ConfigError(f"{name} must be true or false, got {raw!r}")


def _names(name: str, raw: str) -> tuple[str, ...]:
    items = tuple(part.strip() for part in raw.split(",") if part.strip())
    for item in items:
        if len(item) > 128:
            raise ConfigError(f"{name} has a name longer than 128 characters: {item[:40]!r}...")
    return items


def _leases(name: str, raw: str) -> dict[str, float]:
    leases: dict[str, float] = {}
    for part in (p.strip() for p in raw.split(",") if p.strip()):
        queue, sep, secs = part.partition("=")
        if not sep or not queue.strip():
            raise ConfigError(f"{name} must look like 'emails=60,reports=600', got {raw!r}")
        leases[queue.strip()] = _number(name, secs, float, 0.1, "seconds >= 0.1 per queue")
    return leases


def _url(name: str, raw: str) -> str | None:
    """A second connection string (SKIPLOCK_DIRECT_URL), checked like DATABASE_URL; empty means unset."""
    if not raw.strip():
        return None
    try:
        return validate_database_url(raw.strip())
    except ConfigError as exc:
        raise ConfigError(str(exc).replace("DATABASE_URL", name, 1)) from None


def validate_database_url(url: str) -> str:
    """Check that `url` parses as a libpq connection string; return it unchanged."""
    try:
        psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        first_line = str(exc).splitlines()[0] if str(exc) else "unparseable"
        raise ConfigError(f"DATABASE_URL is not a valid PostgreSQL connection string: {first_line}") from None
    return url


_PARSERS: dict[str, tuple[str, Callable[[str, str], Any]]] = {
    "SKIPLOCK_TASKS": ("tasks", _names),
    "SKIPLOCK_QUEUES": ("queues", _names),
    "SKIPLOCK_CONCURRENCY": ("concurrency", lambda n, r: _number(n, r, int, 1, "a whole number >= 1")),
    "SKIPLOCK_ASYNC_CONCURRENCY": (
        "async_concurrency", lambda n, r: _number(n, r, int, 1, "a whole number >= 1")),
    "SKIPLOCK_BATCH_SIZE": ("batch_size", lambda n, r: _number(n, r, int, 1, "a whole number >= 1")),
    "SKIPLOCK_PREFETCH": ("prefetch", lambda n, r: None if r.strip().lower() == "auto"
                          else _number(n, r, int, 0, "'auto' or a whole number >= 0")),
    "SKIPLOCK_POLL_INTERVAL": ("poll_interval", lambda n, r: _number(n, r, float, 0.01, "seconds >= 0.01")),
    "SKIPLOCK_LEASE_SECONDS": ("lease_seconds", lambda n, r: _number(n, r, float, 0.1, "seconds >= 0.1")),
    "SKIPLOCK_QUEUE_LEASES": ("queue_leases", _leases),
    "SKIPLOCK_HEARTBEAT_INTERVAL": (
        "heartbeat_interval", lambda n, r: _number(n, r, float, 0, "seconds >= 0 (0 disables)")),
    "SKIPLOCK_ACK_INTERVAL_MS": (
        "ack_interval", lambda n, r: _number(n, r, float, 0, "milliseconds >= 0") / 1000.0),
    "SKIPLOCK_ACK_BATCH": ("ack_batch", lambda n, r: _number(n, r, int, 1, "a whole number >= 1")),
    "SKIPLOCK_SHUTDOWN_GRACE": ("shutdown_grace", lambda n, r: _number(n, r, float, 0, "seconds >= 0")),
    "SKIPLOCK_REAPER_INTERVAL": ("reaper_interval", lambda n, r: _number(n, r, float, 0.05, "seconds >= 0.05")),
    "SKIPLOCK_VACUUM_DEAD_ROWS": (
        "vacuum_dead_rows", lambda n, r: _number(n, r, int, 0, "a whole number >= 0 (0 disables)")),
    "SKIPLOCK_KEEP_HISTORY": ("keep_history", _bool),
    "SKIPLOCK_HISTORY_RETENTION": (
        "history_retention", lambda n, r: _number(n, r, float, 0, "seconds >= 0")),
    "SKIPLOCK_DEAD_RETENTION": ("dead_retention", lambda n, r: _number(n, r, float, 0, "seconds >= 0")),
    "SKIPLOCK_AUDIT_RETENTION": ("audit_retention", lambda n, r: _number(n, r, float, 0, "seconds >= 0")),
    "SKIPLOCK_STATS_RETENTION": ("stats_retention", lambda n, r: _number(n, r, float, 0, "seconds >= 0")),
    "SKIPLOCK_MAX_PAYLOAD_BYTES": (
        "max_payload_bytes", lambda n, r: _number(n, r, int, 2, "a whole number of bytes >= 2")),
    "SKIPLOCK_MAX_RESULT_BYTES": (
        "max_result_bytes", lambda n, r: _number(n, r, int, 2, "a whole number of bytes >= 2")),
    "SKIPLOCK_RESULT_TTL": ("result_ttl", lambda n, r: _number(n, r, float, 0, "seconds >= 0")),
    "SKIPLOCK_SIGNAL_RETENTION": ("signal_retention", lambda n, r: _number(n, r, float, 0, "seconds >= 0")),
    "SKIPLOCK_SWEEP_INTERVAL": ("sweep_interval", lambda n, r: _number(n, r, float, 0.05, "seconds >= 0.05")),
    "SKIPLOCK_MAX_ATTEMPTS": ("default_max_attempts", lambda n, r: _number(n, r, int, 1, "a whole number >= 1")),
    "SKIPLOCK_BACKOFF_BASE": ("backoff_base", lambda n, r: _number(n, r, float, 0, "seconds >= 0")),
    "SKIPLOCK_BACKOFF_CAP": ("backoff_cap", lambda n, r: _number(n, r, float, 0, "seconds >= 0")),
    "SKIPLOCK_POOL_SIZE": ("pool_size", lambda n, r: _number(n, r, int, 1, "a whole number >= 1")),
    "SKIPLOCK_LOG_FORMAT": ("log_format", lambda n, r: _choice(n, r, ("text", "json"))),
    "SKIPLOCK_LOG_LEVEL": ("log_level", lambda n, r: _choice(n, r.upper(), ("DEBUG", "INFO", "WARNING", "ERROR"))),
    "SKIPLOCK_HEALTH_PORT": ("health_port", lambda n, r: _number(n, r, int, 1, "a TCP port 1-65535", 65535)),
    "SKIPLOCK_DIRECT_URL": ("direct_url", lambda n, r: _url(n, r)),
    "SKIPLOCK_PREPARED_STATEMENTS": ("prepared_statements", _bool),
    "SKIPLOCK_JOB_LOGS": ("job_logs", _bool),
    "SKIPLOCK_HISTORY_MODE": ("history_mode", lambda n, r: _choice(n, r.strip().lower(),
                                                                    ("delete", "keep", "partitioned"))),
}

# Variables read elsewhere (console, dev command) that must not be flagged as typos.
_KNOWN_ELSEWHERE = {
    "SKIPLOCK_WEB_USER", "SKIPLOCK_WEB_PASSWORD", "SKIPLOCK_WEB_PASSWORD_HASH", "SKIPLOCK_WEB_AUTH",
    "SKIPLOCK_CONSOLE_READ_URL",  # the console's standby (webapp/settings.py, docs/howto/on-call.md)
    "SKIPLOCK_WEB_READONLY_USER", "SKIPLOCK_WEB_READONLY_PASSWORD", "SKIPLOCK_WEB_READONLY_PASSWORD_HASH",
    "SKIPLOCK_SECRET_KEY", "SKIPLOCK_DEV_DIR", "SKIPLOCK_APP_NAME", "SKIPLOCK_RECONNECT_TIMEOUT",
    "SKIPLOCK_METRICS_TOKEN", "SKIPLOCK_DB_DEADLINE", "SKIPLOCK_BEHIND_PROXY", "SKIPLOCK_SESSION_IDLE_MINUTES",
    "SKIPLOCK_LOGIN_MAX_FAILURES", "SKIPLOCK_LOGIN_LOCKOUT_SECONDS",
    "SKIPLOCK_DATABASES",  # skiplock.core.plumbing.databases: the console over several databases, doctor --all
    # the migrator's override for changed applied migrations (core/plumbing/migrate.py)
    "SKIPLOCK_MIGRATE_ALLOW_CHANGED",
    # the skiplock.testing plugin's (tools/testing.py): a worker a user's test session starts inherits them
    "SKIPLOCK_TEST_SERVER_URL", "SKIPLOCK_TEST_DATABASE_URL",
    # pushed alerts (skiplock.monitor.alert_rules.AlertSettings)
    "SKIPLOCK_ALERT_URLS", "SKIPLOCK_ALERT_DEAD_COUNT", "SKIPLOCK_ALERT_WINDOW", "SKIPLOCK_ALERT_OLDEST_READY",
    "SKIPLOCK_ALERT_INTERVAL", "SKIPLOCK_CONSOLE_URL",
}


def _choice(name: str, raw: str, options: tuple[str, ...]) -> str:
    value = raw.strip()
    if value not in options:
        raise ConfigError(f"{name} must be one of {', '.join(options)}, got {raw!r}")
    return value


def load_settings(env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
    """Build Settings from `env` (default os.environ); keyword overrides win (CLI flags)."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    known = set(_PARSERS) | _KNOWN_ELSEWHERE
    for name in env:
        if name.startswith("SKIPLOCK_") and name not in known:
            hint = difflib.get_close_matches(name, sorted(known), n=1)
            suggestion = f" (did you mean {hint[0]}?)" if hint else ""
            raise ConfigError(f"unknown setting {name}{suggestion}")
    if env.get("DATABASE_URL"):
        values["database_url"] = validate_database_url(env["DATABASE_URL"])
    for name, (attr, parse) in _PARSERS.items():
        if name in env:
            values[attr] = parse(name, env[name])
    values.update({k: v for k, v in overrides.items() if v is not None})
    settings = Settings(**values)
    if settings.backoff_cap < settings.backoff_base:
        raise ConfigError("SKIPLOCK_BACKOFF_CAP must be >= SKIPLOCK_BACKOFF_BASE")
    shortest = min([settings.lease_seconds, *settings.queue_leases.values()])
    if settings.heartbeat_interval and settings.heartbeat_interval >= shortest:
        # every lease would expire before its first heartbeat: each job reclaimed mid-run, forever
        raise ConfigError(f"SKIPLOCK_HEARTBEAT_INTERVAL ({settings.heartbeat_interval:g}s) must be shorter "
                          f"than the shortest lease ({shortest:g}s); 0 disables heartbeats")
    return settings
