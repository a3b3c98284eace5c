"""The backend's OPTIONS, checked once, and `enqueue_options()`, skiplock's per-enqueue extras.

    "OPTIONS": {
        "DATABASE": "default",                      # the Django database alias with skiplock's tables
        "max_attempts": 5,                          # every task of this backend (skiplock's default: 20)
        "backoff": {"base": 2, "cap": 600},         # retry delays, seconds (the worker's)
        "queues": {"emails": {"concurrency": 2, "rate": "10/s", "lease": 60}},   # global queue limits
        "tasks": {"shop.tasks.send_receipt": {      # per task, by its import path
            "max_attempts": 3,
            "lock_key": "order-{order_id}",         # one job per key runs at a time
            "unique_key": "receipt-{order_id}",     # one job per key in flight
            "tenant": "{customer}",                 # claims take tenants round-robin
        }},
    }

Keys are templates filled from the call's keyword arguments (`str.format(**kwargs)`); positional
arguments are `{args[0]}`. `enqueue_options(...)` sets the same extras (and `depends_on`) for the
enqueues of a `with` block, where a value depends on more than the arguments.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from skiplock.core.errors import ConfigError

TASK_KEYS = ("max_attempts", "lock_key", "unique_key", "tenant")
QUEUE_KEYS = ("concurrency", "rate", "lease")
TOP_KEYS = ("DATABASE", "max_attempts", "backoff", "queues", "tasks")

_EXTRAS: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("skiplock_django_extras",
                                                                                 default=None)


@dataclass(frozen=True)
class BackendOptions:
    """OPTIONS as the backend and the worker read them."""

    database: str
    max_attempts: int | None
    backoff_base: float | None
    backoff_cap: float | None
    queues: Mapping[str, Mapping[str, Any]]
    tasks: Mapping[str, Mapping[str, Any]]


def parse(options: Mapping[str, Any]) -> BackendOptions:
    """OPTIONS checked: an unknown key, or a value of the wrong kind, is a ConfigError naming it."""
    _known("OPTIONS", options, TOP_KEYS)
    backoff = options.get("backoff") or {}
    _known("OPTIONS backoff", backoff, ("base", "cap"))
    queues = options.get("queues") or {}
    for queue, limits in queues.items():
        _known(f"OPTIONS queues[{queue!r}]", limits, QUEUE_KEYS)
    tasks = options.get("tasks") or {}
    for path, extras in tasks.items():
        _known(f"OPTIONS tasks[{path!r}]", extras, TASK_KEYS)
    max_attempts = options.get("max_attempts")
    if max_attempts is not None and (not isinstance(max_attempts, int) or max_attempts < 1):
        raise ConfigError(f"OPTIONS max_attempts must be a whole number >= 1, got {max_attempts!r}")
    return BackendOptions(str(options.get("DATABASE", "default")), max_attempts,
                          _seconds("backoff base", backoff.get("base")), _seconds("backoff cap", backoff.get("cap")),
                          queues, tasks)


def _known(where: str, given: Any, keys: Iterable[str]) -> None:
    if not isinstance(given, Mapping):
        raise ConfigError(f"{where} must be a dict, got {type(given).__name__}")
    unknown = sorted(set(given) - set(keys))
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; known: {', '.join(keys)}")


def _seconds(name: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ConfigError(f"OPTIONS {name} must be a number of seconds >= 0, got {value!r}")
    return float(value)


@contextmanager
def enqueue_options(*, depends_on: Iterable[Any] | None = None, on_dependency_failure: str | None = None,
                    **extras: Any) -> Iterator[None]:
    """skiplock's extras for the enqueues of this block: `depends_on` (TaskResults or job ids: the task waits
    for them, as a workflow's child), `on_dependency_failure`, and any of max_attempts, lock_key, unique_key,
    tenant (plain values, which win over OPTIONS)."""
    _known("enqueue_options()", extras, TASK_KEYS)
    given = dict(extras)
    if depends_on is not None:
        given["depends_on"] = [int(getattr(parent, "id", parent)) for parent in depends_on]
    if on_dependency_failure is not None:
        given["on_dependency_failure"] = on_dependency_failure
    token = _EXTRAS.set({**(_EXTRAS.get() or {}), **given})
    try:
        yield
    finally:
        _EXTRAS.reset(token)


def extras_for(options: BackendOptions, path: str, args: Any, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments for skiplock's enqueue: OPTIONS (templates filled), then enqueue_options()."""
    found: dict[str, Any] = {}
    if options.max_attempts is not None:
        found["max_attempts"] = options.max_attempts
    for key, value in (options.tasks.get(path) or {}).items():
        found[key] = _fill(path, key, value, args, kwargs) if isinstance(value, str) else value
    found.update(_EXTRAS.get() or {})
    return found


def _fill(path: str, key: str, template: str, args: Any, kwargs: Mapping[str, Any]) -> str:
    try:
        return template.format(*args, args=args, **kwargs)
    except (KeyError, IndexError, AttributeError, TypeError) as exc:
        raise ConfigError(f"OPTIONS tasks[{path!r}][{key!r}] = {template!r} cannot be filled from this call's "
                          f"arguments: {type(exc).__name__}: {exc}") from None
