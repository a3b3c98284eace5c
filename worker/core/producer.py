"""Enqueue jobs from Python: validation first, then one INSERT (or one for many jobs).

Everything a caller can get wrong is checked before the database is touched, so a bad call
raises EnqueueError and writes nothing. With `conn=` the INSERT joins the caller's transaction.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from functools import partial
from typing import Any, NamedTuple, overload

import psycopg

from skiplock.core import linked_insert, task_defaults, task_options
from skiplock.core import unique_for as unique_for_keys
from skiplock.core.errors import EnqueueError
from skiplock.core.plumbing import adapters, tracing
from skiplock.core.plumbing.config import Settings, load_settings
from skiplock.core.plumbing.producer_pool import close_default_pool, default_pool  # noqa: F401  (re-exported)
from skiplock.core.registry import REGISTRY
from skiplock.core.sql import queries

JOBS_ENQUEUE_SQL = queries("jobs_enqueue")
# The INSERT of one job for (on_conflict, traced), with a unique_key; each is written out in jobs_enqueue.sql.
_ENQUEUE_UNIQUE = {
    ("ignore", False): JOBS_ENQUEUE_SQL.enqueue_unique_ignore,
    ("ignore", True): JOBS_ENQUEUE_SQL.enqueue_unique_ignore_traced,
    ("bump", False): JOBS_ENQUEUE_SQL.enqueue_unique_bump,
    ("bump", True): JOBS_ENQUEUE_SQL.enqueue_unique_bump_traced,
    ("replace", False): JOBS_ENQUEUE_SQL.enqueue_unique_replace,
    ("replace", True): JOBS_ENQUEUE_SQL.enqueue_unique_replace_traced,
}
ON_CONFLICT = ("ignore", "bump", "replace")  # what a unique_key still in flight does (enqueue's docstring)

MAX_QUEUE_NAME = 128
MAX_DELAY_SECONDS = 100 * 365 * 86400  # a delay past this is a mistake, not a schedule
# From this many jobs (none with a unique_key or a run_at), enqueue_many uses COPY: ~3x faster
# than the unnest INSERT for big batches, not worth its extra round trip (the ids are reserved
# first) for small ones. Measured here, medians of one connection's committed batches (unnest /
# COPY, ms): 10 jobs 0.49 / 0.61, 20 jobs 0.68 / 0.73, 50 jobs 1.12 / 0.94, 88 jobs 1.68 / 1.22,
# 150 jobs 2.56 / 1.63, 220 jobs 3.50 / 2.10. The two cross between 20 and 50; it was 200 before,
# which left batches of 40-200 jobs a third slower than they had to be.
COPY_THRESHOLD = 40
MAX_UNIQUE_KEY = 512

# One encoder for every payload: json.dumps with options builds a new one per call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


class JobSpec(NamedTuple):
    """One validated job, ready to be bound into an INSERT.

    A NamedTuple, not a frozen dataclass: bulk enqueue builds one per job, and a frozen
    dataclass's __init__ costs several times more.
    """

    queue: str
    payload_json: str
    priority: int
    run_at: datetime | None
    unique_key: str | None
    max_attempts: int
    lock_key: str | None = None  # at most one job per key runs at a time
    tenant: str | None = None  # claims take a queue's tenants round-robin
    version: int = 1  # the payload's version: the task's @task(version=...) unless given
    weight: int = 1  # how much of its queue's concurrency and rate limits the job takes
    # the @task options this producer could not know (bits of task_options.UNKNOWN_*): the worker fills them in
    unknown: int | None = None


# Queue names already validated in this process: a bulk enqueue names the same few queues
# thousands of times. Bounded, so a producer inventing names cannot grow it without limit.
_VALID_QUEUES: set[str] = set()
_VALID_QUEUES_MAX = 1024


def _validate_queue(queue: object) -> str:
    if type(queue) is str and queue in _VALID_QUEUES:
        return queue
    checked = _check_queue(queue)
    if len(_VALID_QUEUES) < _VALID_QUEUES_MAX:
        _VALID_QUEUES.add(checked)
    return checked


def _check_queue(queue: object) -> str:
    if not isinstance(queue, str) or not queue.strip():
        raise EnqueueError("queue name must be a non-empty string")
    if len(queue) > MAX_QUEUE_NAME:
        raise EnqueueError(f"queue name is longer than {MAX_QUEUE_NAME} characters")
    if "\x00" in queue:
        raise EnqueueError("queue name must not contain NUL characters")
    _require_utf8("queue name", queue)
    return queue


def _require_utf8(what: str, text: str) -> bytes:
    """`text` as UTF-8. Lone surrogates (e.g. U+D800) are valid Python str but not UTF-8:
    PostgreSQL cannot store them, so they are an EnqueueError."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise EnqueueError(f"{what} is not valid Unicode text: {exc.reason} at position {exc.start}") from None


def _contains_nul(value: Any) -> bool:
    """PostgreSQL's jsonb cannot store U+0000 in strings or keys; find it before the database does."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, Mapping):
        return any(_contains_nul(k) or _contains_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_contains_nul(v) for v in value)
    return False


def serialize_payload(payload: Any, max_bytes: int) -> str:
    """The payload as compact JSON text, or EnqueueError saying why it cannot be stored."""
    if isinstance(payload, float) and not math.isfinite(payload):
        raise EnqueueError("payload must be JSON: NaN and Infinity are not allowed")
    try:
        text = _ENCODER.encode(payload)
    except (TypeError, ValueError) as exc:
        raise EnqueueError(f"payload is not JSON-serialisable: {exc}") from None
    # json.dumps writes every NUL as \u0000, so a text without that sequence has none; only a
    # text with it (a NUL, or a literal backslash-u0000) pays for the walk that tells which.
    if "\\u0000" in text and _contains_nul(payload):
        raise EnqueueError("payload must not contain NUL (\\u0000) characters: jsonb cannot store them")
    # most payloads are ASCII: one C-level check, and no encoded copy just to measure the size
    size = len(text) if text.isascii() else len(_require_utf8("payload", text))
    if size > max_bytes:
        raise EnqueueError(
            f"payload is {size} bytes, over the limit of {max_bytes} (SKIPLOCK_MAX_PAYLOAD_BYTES); "
            "store large data elsewhere and enqueue a reference to it"
        )
    return text


def _validate_when(run_at: datetime | None, delay: float | timedelta | None) -> datetime | None:
    if run_at is not None and delay is not None:
        raise EnqueueError("give either run_at or delay, not both")
    if run_at is not None:
        if not isinstance(run_at, datetime):
            raise EnqueueError("run_at must be a datetime")
        if run_at.tzinfo is None or run_at.utcoffset() is None:
            raise EnqueueError(
                "run_at must be timezone-aware (e.g. datetime.now(timezone.utc)); naive datetimes "
                "are ambiguous and rejected")
        return run_at
    if delay is None:
        return None
    seconds = delay.total_seconds() if isinstance(delay, timedelta) else delay
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not math.isfinite(seconds):
        raise EnqueueError("delay must be a number of seconds or a timedelta")
    if seconds < 0:
        raise EnqueueError(f"delay must not be negative, got {seconds}")
    if seconds == 0:
        return None
    if seconds > MAX_DELAY_SECONDS:
        # past year 9999 datetime overflows; anything this far out is a unit mistake (ms for s?)
        raise EnqueueError(f"delay must be at most {MAX_DELAY_SECONDS:,} seconds (100 years), got {seconds}")
    from datetime import UTC

    return datetime.now(UTC) + timedelta(seconds=seconds)


def _validate_int(name: str, value: object, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise EnqueueError(f"{name} must be a whole number, got {value!r}")
    if not -(2**31) <= value < 2**31:
        raise EnqueueError(f"{name} must fit in a 32-bit integer, got {value}")
    if minimum is not None and value < minimum:
        raise EnqueueError(f"{name} must be >= {minimum}, got {value}")
    return value


def _key_text(name: str, value: object) -> str | None:
    """A unique_key, lock_key or tenant: None, or a non-empty string of at most MAX_UNIQUE_KEY characters."""
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise EnqueueError(f"{name} must be a non-empty string or None")
    if len(value) > MAX_UNIQUE_KEY or "\x00" in value:
        raise EnqueueError(f"{name} must be at most {MAX_UNIQUE_KEY} characters, without NUL")
    _require_utf8(name, value)
    return value


def _flow_fields(queue: object, payload: Any, lock_key: object, tenant: object,
                 version: object) -> tuple[str | None, str | None, int]:
    """lock_key, tenant and version for a job: given ones validated, the rest from its @task (or, for a
    producer without the task, from the row its workers keep: worker/core/task_defaults.py)."""
    registered = REGISTRY.get(queue) if isinstance(queue, str) else None
    if lock_key is None and registered is not None and registered.lock_key is not None:
        derive = registered.lock_key
        try:
            lock_key = derive(payload) if callable(derive) else derive
        except Exception as exc:  # the user's function: say whose it is
            raise EnqueueError(f"@task({queue!r}) lock_key function failed: {type(exc).__name__}: {exc}") from None
    remote = task_defaults.known(queue) if registered is None else None
    if remote is not None and lock_key is None:
        if remote.lock_key_computed:
            # enqueueing without the lock would silently break the task's one-at-a-time promise
            raise EnqueueError(f"@task({queue!r}) computes lock_key from the payload, and this process has not "
                               "imported that task: import its module here, or pass lock_key= to enqueue")
        lock_key = remote.lock_key
    if version is None:
        version = registered.version if registered is not None else (remote.version if remote is not None else 1)
    return (_key_text("lock_key", lock_key), _key_text("tenant", tenant),
            _validate_int("version", version, minimum=1))


def build_spec(
    queue: str,
    payload: Any,
    *,
    priority: int = 0,
    run_at: datetime | None = None,
    delay: float | timedelta | None = None,
    unique_key: str | None = None,
    max_attempts: int | None = None,
    max_payload_bytes: int | None = None,
    default_max_attempts: int = 20,
    lock_key: str | None = None,
    tenant: str | None = None,
    version: int | None = None,
    weight: int = 1,
) -> JobSpec:
    """Validate one job's arguments into a JobSpec; raises EnqueueError on the first problem."""
    if max_payload_bytes is None:
        max_payload_bytes = load_settings().max_payload_bytes
    unique_key = _key_text("unique_key", unique_key)
    unknown = task_options.unknown_bits(queue, REGISTRY.get(queue) if isinstance(queue, str) else None,
                                        max_attempts=max_attempts, lock_key=lock_key, version=version)
    lock_key, tenant, version = _flow_fields(queue, payload, lock_key, tenant, version)
    return JobSpec(  # positional: keyword construction of a NamedTuple costs more, per job
        _validate_queue(queue),
        serialize_payload(payload, max_payload_bytes),
        _validate_int("priority", priority),
        _validate_when(run_at, delay),
        unique_key,
        _validate_int("max_attempts", default_max_attempts if max_attempts is None else max_attempts, minimum=1),
        lock_key,
        tenant,
        version,
        _validate_int("weight", weight, minimum=1),
        unknown,
    )


def _execute(conn: Any, sql: str, params: Mapping[str, Any]) -> list[tuple]:
    """Run on `conn` (a psycopg 3 or psycopg2 connection: the same cursor API), or the pool."""
    if conn is not None:
        with adapters.tuple_cursor(conn) as cur:
            cur.execute(sql, params)
            return cur.fetchall()
    with default_pool().connection() as pooled, pooled.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall()


_settings_cache: tuple[tuple[str | None, str | None], Settings] | None = None


def producer_settings() -> Settings:
    """Settings for enqueue, rebuilt only when a variable the producer reads has changed.

    load_settings() re-reads and re-validates the whole environment, which costs about as much
    as the INSERT itself on the one-job-per-transaction path; the producer needs two numbers.
    """
    global _settings_cache
    key = (os.environ.get("SKIPLOCK_MAX_PAYLOAD_BYTES"), os.environ.get("SKIPLOCK_MAX_ATTEMPTS"))
    cached = _settings_cache
    if cached is None or cached[0] != key:
        cached = (key, load_settings())
        _settings_cache = cached  # one tuple assignment: other threads see the old or the new pair
    return cached[1]


# Without a unique_key there is nothing to conflict with: the call always returns the new job's id.
@overload
def enqueue(queue: str, payload: Any, *, conn: Any = ..., priority: int = ..., run_at: datetime | None = ...,
            delay: float | timedelta | None = ..., unique_key: None = ..., unique_for: None = ...,
            max_attempts: int | None = ...,
            on_conflict: str = ..., lock_key: str | None = ..., tenant: str | None = ...,
            version: int | None = ..., weight: int = ..., depends_on: Iterable[int] | None = ...,
            on_dependency_failure: str = ...) -> int: ...
@overload
def enqueue(queue: str, payload: Any, *, conn: Any = ..., priority: int = ..., run_at: datetime | None = ...,
            delay: float | timedelta | None = ..., unique_key: str | None, unique_for: float | timedelta | None = ...,
            max_attempts: int | None = ...,
            on_conflict: str = ..., lock_key: str | None = ..., tenant: str | None = ...,
            version: int | None = ..., weight: int = ..., depends_on: Iterable[int] | None = ...,
            on_dependency_failure: str = ...) -> int | None: ...


def enqueue(
    queue: str,
    payload: Any,
    *,
    conn: Any = None,
    priority: int = 0,
    run_at: datetime | None = None,
    delay: float | timedelta | None = None,
    unique_key: str | None = None,
    unique_for: float | timedelta | None = None,
    max_attempts: int | None = None,
    on_conflict: str = "ignore",
    lock_key: str | None = None,
    tenant: str | None = None,
    version: int | None = None,
    weight: int = 1,
    depends_on: Iterable[int] | None = None,
    on_dependency_failure: str = "dead",
) -> int | None:
    """Enqueue one job; return its id, or None when unique_key matched a job still in flight.

    `on_conflict` says what a unique_key already in flight does (one race-safe statement each):
    "ignore" (nothing, None), "bump" (the queued job's run_at becomes the later one; its id),
    "replace" (the queued job takes this payload and run_at; its id); a running job is never
    changed (None). `unique_for` (seconds or a timedelta, with `unique_key`): the key is held that long
    after this enqueue, whatever the job's state: a second enqueue with it returns the first job's id and
    writes nothing (see skiplock.core.unique_for). `lock_key`: at most one job per key runs at a time,
    across all workers (default: the task's @task(lock_key=...)). `tenant`: claims take tenants round-robin.
    `version`: the payload's version (default: the task's @task(version=...), else 1). `weight` (>= 1): how
    much the job counts toward its queue's concurrency and rate limits, global and per tenant.

    `depends_on`: ids of jobs this one waits for. It becomes ready, in the same transaction as the
    last parent's success, once every parent has succeeded; a parent already done counts at once,
    an unknown id is an EnqueueError. When a parent ends dead or cancelled, `on_dependency_failure`
    says what this job does: "dead" (the default: it ends too, dead or cancelled like its parent,
    and so do its own dependents) or "run" (it runs anyway, and can read its parents' states in
    `job.parent_states`). Not with `unique_key`. See the workflows guide.

    With `conn`, the INSERT joins that connection's current transaction (commit or roll back
    with your business write): a psycopg 3 or psycopg2 connection, an SQLAlchemy Connection,
    Session or scoped_session (Flask-SQLAlchemy's db.session), or a Django connection (see
    skiplock.core.plumbing.adapters). Without it, a pooled autocommit
    connection is used.
    """
    raw = None if conn is None else adapters.sync_connection(conn)
    if REGISTRY.get(queue) is None:  # a producer without the task: its workers' options (task_defaults.py)
        refresh_task_defaults(raw, [queue])
    window = unique_for_window(unique_for, unique_key, on_conflict, depends_on)
    options = {"priority": priority, "run_at": run_at, "delay": delay, "unique_key": unique_key,
               "max_attempts": max_attempts, "lock_key": lock_key, "tenant": tenant, "version": version,
               "weight": weight}
    if depends_on is not None or on_dependency_failure != "dead":
        specs, parents, policies = one_linked_job(queue, payload, on_conflict, depends_on, on_dependency_failure,
                                                  options)
        with tracing.enqueue_span(queue):
            return linked_insert.insert_linked(partial(_execute, raw), specs, parents, policies)[0]
    with tracing.enqueue_span(queue) as trace_context:  # OpenTelemetry, when configured
        sql, params = _one_job_statement(queue, payload, trace_context, on_conflict, **options)
        if window is not None:
            return unique_for_keys.enqueue(partial(_execute, raw), params, window)
        rows = _execute(raw, sql, params)
    return rows[0][0] if rows else None


def unique_for_window(unique_for: float | timedelta | None, unique_key: str | None, on_conflict: str,
                      depends_on: Iterable[int] | None) -> float | None:
    """unique_for in seconds (None without it), checked with the options it goes with."""
    if unique_for is None:
        return None
    window = unique_for_keys.seconds(unique_for)
    if unique_key is None or on_conflict != "ignore" or depends_on is not None:
        raise EnqueueError("unique_for needs a unique_key, and takes neither on_conflict nor depends_on")
    return window


def one_linked_job(queue: str, payload: Any, on_conflict: str, depends_on: Iterable[int] | None,
                   on_dependency_failure: str, options: Mapping[str, Any],
                   ) -> tuple[list[JobSpec], list[list[int]], list[str | None]]:
    """Validate one enqueue with depends_on (or a dependency policy): the linked insert's rows for it."""
    if on_conflict != "ignore":
        raise EnqueueError("on_conflict needs a unique_key, which depends_on cannot have")
    return linked_specs([{"queue": queue, "payload": payload, **options, "depends_on": depends_on,
                          "on_dependency_failure": on_dependency_failure}])


def _one_job_statement(queue: str, payload: Any, trace_context: str | None = None, on_conflict: str = "ignore",
                       **options: Any) -> tuple[str, dict[str, Any]]:
    """Validate one job and return the INSERT that enqueues it, with its parameters."""
    if on_conflict not in ON_CONFLICT:
        raise EnqueueError(f"on_conflict must be one of {', '.join(ON_CONFLICT)}, got {on_conflict!r}")
    settings = producer_settings()
    spec = build_spec(queue, payload, max_payload_bytes=settings.max_payload_bytes,
                      default_max_attempts=_default_attempts(queue, settings), **options)
    if on_conflict != "ignore" and spec.unique_key is None:
        raise EnqueueError(f"on_conflict={on_conflict!r} needs a unique_key to conflict on")
    params = {"queue": spec.queue, "payload": spec.payload_json, "priority": spec.priority,
              "run_at": spec.run_at, "max_attempts": spec.max_attempts, "lock_key": spec.lock_key,
              "tenant": spec.tenant, "version": spec.version, "weight": spec.weight,
              "task_options_unknown": spec.unknown}
    traced = trace_context is not None
    if traced:  # OpenTelemetry: the enqueuing span's context travels with the row
        params["trace_context"] = trace_context
    if spec.unique_key is None:
        return (JOBS_ENQUEUE_SQL.enqueue_plain_traced if traced else JOBS_ENQUEUE_SQL.enqueue_plain), params
    params["unique_key"] = spec.unique_key
    return _ENQUEUE_UNIQUE[on_conflict, traced], params


def enqueue_many(
    jobs: Iterable[Mapping[str, Any] | tuple[str, Any]],
    *,
    conn: Any = None,
    depends_on: Iterable[int] | None = None,
    on_dependency_failure: str = "dead",
) -> list[int]:
    """Enqueue many jobs with one INSERT; return the ids of the jobs inserted.

    Each item is `(queue, payload)` or a mapping with the keyword arguments of `enqueue`
    (queue, payload, priority, run_at, delay, unique_key, max_attempts, lock_key, tenant, version, weight;
    on_conflict is enqueue's alone: collapsed items here are always ignored). Every item is
    validated before anything is sent; jobs collapsed by unique_key are left out of the result.
    `conn` is as for `enqueue`. `depends_on` and `on_dependency_failure` (as for `enqueue`) apply to
    every item; an item's own `depends_on` / `on_dependency_failure` keys add to / override them.
    """
    raw = None if conn is None else adapters.sync_connection(conn)
    jobs = jobs if isinstance(jobs, list) else list(jobs)
    refresh_task_defaults(raw, queues_of(jobs))
    if depends_on is not None or on_dependency_failure != "dead" or _any_linked(jobs):
        specs_l, parents, policies = linked_specs(jobs, depends_on=depends_on,
                                                  on_dependency_failure=on_dependency_failure)
        return linked_insert.insert_linked(partial(_execute, raw), specs_l, parents, policies) if specs_l else []
    specs = _many_specs(jobs)
    if not specs:
        return []
    # COPY is psycopg 3's, outside pipeline mode (libpq refuses COPY there); other drivers and a
    # pipelined connection take the unnest INSERT, which is correct for any size
    if (len(specs) >= COPY_THRESHOLD and (raw is None or _copy_allowed(raw))
            and all(s.unique_key is None and s.run_at is None and s.lock_key is None and s.tenant is None
                    for s in specs)):
        if raw is not None:
            return _copy_specs(raw, specs)
        with default_pool().connection() as pooled:
            return _copy_specs(pooled, specs)
    rows = _execute(raw, JOBS_ENQUEUE_SQL.enqueue_many, _many_params(specs))
    return [row[0] for row in rows]


def _any_linked(jobs: Iterable[Any]) -> bool:
    """Whether an item of an enqueue_many call (a list: peeking must not consume it) names parents."""
    return isinstance(jobs, list) and any(
        isinstance(item, Mapping) and ("depends_on" in item or "on_dependency_failure" in item) for item in jobs)


def linked_specs(jobs: Iterable[Mapping[str, Any] | tuple[str, Any]], *, depends_on: Iterable[int] | None = None,
                 on_dependency_failure: str = "dead") -> tuple[list[JobSpec], list[list[int]], list[str | None]]:
    """Validate the items of a linked enqueue: their JobSpecs, each one's parents and policy column."""
    shared = linked_insert.parent_ids(depends_on) if depends_on is not None else []
    items: list[Mapping[str, Any] | tuple[str, Any]] = []
    parents: list[list[int]] = []
    policies: list[str | None] = []
    for index, item in enumerate(jobs):
        try:
            if isinstance(item, Mapping):
                own = item.get("depends_on")
                mine = (shared + [p for p in linked_insert.parent_ids(own) if p not in shared] if own is not None
                        else shared)
                policies.append(linked_insert.policy_value(item.get("on_dependency_failure", on_dependency_failure)))
                item = {k: v for k, v in item.items() if k not in ("depends_on", "on_dependency_failure")}
                linked_insert.refuse_unique(item.get("unique_key"))
            else:
                mine = shared
                policies.append(linked_insert.policy_value(on_dependency_failure))
        except EnqueueError as exc:
            raise EnqueueError(f"job #{index}: {exc}") from None
        parents.append(mine)
        items.append(item)
    return _many_specs(items), parents, policies


def _copy_allowed(conn: Any) -> bool:
    """A psycopg 3 connection not in pipeline mode (`with conn.pipeline():`), where COPY fails."""
    return isinstance(conn, psycopg.Connection) and conn.pgconn.pipeline_status == psycopg.pq.PipelineStatus.OFF


def _default_attempts(queue: Any, settings: Settings) -> int:
    """max_attempts when enqueue names none: the queue's @task(max_attempts=...) (from the workers' row
    when this process lacks the task), else the setting."""
    registered = REGISTRY.get(queue) if isinstance(queue, str) else None
    if registered is not None:
        if registered.max_attempts is not None:
            return int(registered.max_attempts)
        return settings.default_max_attempts
    remote = task_defaults.known(queue)
    if remote is not None and remote.max_attempts is not None:
        return int(remote.max_attempts)
    return settings.default_max_attempts


def unregistered_queues(queues: Iterable[Any]) -> list[str]:
    """Valid queue names without a handler in this process whose task_defaults row is not fresh: they
    need a lookup. An invalid name is left to the validation, which says what is wrong with it."""
    return task_defaults.stale(q for q in queues if isinstance(q, str) and REGISTRY.get(q) is None and _valid(q))


def _valid(queue: str) -> bool:
    try:
        _validate_queue(queue)
    except EnqueueError:
        return False
    return True


def queues_of(jobs: list[Mapping[str, Any] | tuple[str, Any]]) -> set[Any]:
    """The queue names an enqueue_many call names (a malformed item is left to the validation)."""
    names: set[Any] = set()
    for item in jobs:
        try:
            # exact types first: isinstance(item, Mapping) is an ABC check, ~5x the cost per item
            names.add(item[0] if type(item) is tuple else item["queue"] if type(item) is dict
                      else item.get("queue") if isinstance(item, Mapping) else item[0])
        except (TypeError, IndexError, KeyError):
            continue
    return names


def refresh_task_defaults(conn: Any, queues: Iterable[Any]) -> None:
    """Read the task_defaults rows of `queues` this process lacks the task of, on `conn` or the pool."""
    missing = unregistered_queues(queues)
    if not missing:
        return
    if conn is None:
        with default_pool().connection() as pooled:
            refresh_task_defaults(pooled, missing)
        return
    with adapters.tuple_cursor(conn) as cur:
        cur.execute(task_defaults.TABLE_EXISTS)
        present = cur.fetchone()
        rows: list[Any] = []
        if present and present[0]:
            cur.execute(task_defaults.LOOKUP, {"queues": missing})
            rows = cur.fetchall()
    task_defaults.remember(missing, rows)


def _many_specs(jobs: Iterable[Mapping[str, Any] | tuple[str, Any]]) -> list[JobSpec]:
    """Validate every item of an enqueue_many call; EnqueueError names the first bad one."""
    settings = producer_settings()
    specs: list[JobSpec] = []
    for index, item in enumerate(jobs):
        try:
            if isinstance(item, Mapping):
                specs.append(build_spec(max_payload_bytes=settings.max_payload_bytes,
                                        default_max_attempts=_default_attempts(item.get("queue"), settings),
                                        **item))
            else:
                queue, payload = item
                specs.append(build_spec(queue, payload, max_payload_bytes=settings.max_payload_bytes,
                                        default_max_attempts=_default_attempts(queue, settings)))
        except EnqueueError as exc:
            raise EnqueueError(f"job #{index}: {exc}") from None
        except (TypeError, ValueError) as exc:
            raise EnqueueError(f"job #{index}: expected (queue, payload) or a mapping of enqueue "
                               f"arguments ({exc})") from None
    return specs


def _many_params(specs: list[JobSpec]) -> dict[str, Any]:
    """ENQUEUE_MANY's parallel arrays."""
    return {
        "queues": [s.queue for s in specs],
        "payloads": [s.payload_json for s in specs],
        "priorities": [s.priority for s in specs],
        "run_ats": [s.run_at for s in specs],
        "unique_keys": [s.unique_key for s in specs],
        "max_attempts": [s.max_attempts for s in specs],
        "lock_keys": [s.lock_key for s in specs],
        "tenants": [s.tenant for s in specs],
        "versions": [s.version for s in specs],
        "weights": [s.weight for s in specs],
        "unknown": [s.unknown for s in specs],
    }


def _copy_specs(conn: psycopg.Connection, specs: list[JobSpec]) -> list[int]:
    """Insert plain jobs (no unique_key, no run_at) with COPY; return their ids in input order.

    COPY cannot return ids, so they are drawn from the sequence first. It is one statement, so
    it is atomic on its own and joins the caller's transaction like the INSERT path; the
    statement-level NOTIFY trigger fires for COPY as for INSERT.
    """
    with adapters.tuple_cursor(conn) as cur:
        reserved = cur.execute(JOBS_ENQUEUE_SQL.reserve_job_ids, {"n": len(specs)}).fetchone()
        ids: list[int] = reserved[0] if reserved else []
        with cur.copy(JOBS_ENQUEUE_SQL.copy_jobs) as copy:
            for job_id, spec in zip(ids, specs, strict=True):
                copy.write_row((job_id, spec.queue, spec.payload_json, spec.priority, spec.max_attempts,
                                spec.version, spec.weight, spec.unknown))
    return ids
