"""Typed tasks: `@task` returns a TaskHandle, and a dataclass or pydantic payload is checked both ways.

    @dataclass
    class Welcome:
        to: str
        name: str = ""

    @task("emails")
    def send_welcome(payload: Welcome): ...

    send_welcome.enqueue(Welcome(to="a@example.com"), delay=60)   # or a dict with the same fields
    send_welcome.enqueue_many([Welcome(to="a@x"), Welcome(to="b@x")])
    send_welcome(Welcome(to="a@x"))                               # still a plain call (tests)

At enqueue, the payload is validated and serialised before anything reaches the database: a
field that is missing, unknown or of the wrong type raises EnqueueError naming it, and nothing
is written. In the worker, the handler gets the object back; a stored payload that no longer fits
(an old job, a changed type) makes the job dead with the reason, never a crash loop.
Dataclass fields are checked against simple annotations (str, int, float, bool, list, dict and
their X | None); anything richer is the model's business: use a pydantic model (when pydantic is
installed) for full validation.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types
import typing
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

from skiplock.core.errors import EnqueueError, PermanentFailure
from skiplock.core.producer import enqueue, enqueue_many
from skiplock.core.producer_async import enqueue_async

_SIMPLE = (str, int, float, bool, list, dict)


def payload_type(func: Callable[..., Any]) -> type | None:
    """The dataclass or pydantic model the handler's payload parameter is annotated with, if any."""
    params = [p for p in inspect.signature(func).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "job"]
    if not params:
        return None
    try:
        hint = typing.get_type_hints(func).get(params[0].name)
    except Exception:  # an annotation that does not resolve: treat the payload as untyped
        return None
    if isinstance(hint, type) and (dataclasses.is_dataclass(hint) or _is_pydantic(hint)):
        return hint
    return None


def _is_pydantic(cls: type) -> bool:
    return callable(getattr(cls, "model_validate", None)) and callable(getattr(cls, "model_dump", None))


def _check_field(cls: type, name: str, value: Any, hint: Any) -> None:
    allowed: tuple[Any, ...] = (hint,)
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        allowed = typing.get_args(hint)
    plain = tuple(typing.get_origin(a) or a for a in allowed)
    if not all(a in _SIMPLE or a is type(None) for a in plain):
        return  # a richer annotation: not checked here (see the module doc)
    if value is None and type(None) in plain:
        return
    if isinstance(value, bool) and bool not in plain:
        ok = False  # True is an int to Python, never to a payload
    else:
        ok = isinstance(value, tuple(a for a in plain if a is not type(None))) or (
            float in plain and isinstance(value, int) and not isinstance(value, bool))
    if not ok:
        wanted = " | ".join(getattr(a, "__name__", str(a)) for a in plain)
        raise TypeError(f"field {name!r} of {cls.__name__}: expected {wanted}, got {type(value).__name__}")


def build(cls: type, data: Any) -> Any:
    """The payload object from its JSON form; TypeError/ValueError naming the field when it does not fit."""
    if _is_pydantic(cls):
        return cls.model_validate(data)  # type: ignore[attr-defined]
    if not isinstance(data, dict):
        raise TypeError(f"{cls.__name__} payload must be a JSON object, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise TypeError(f"unknown field {unknown[0]!r} for {cls.__name__}")
    hints = typing.get_type_hints(cls)
    for name, value in data.items():
        _check_field(cls, name, value, hints.get(name, Any))
    missing = [n for n, f in fields.items() if n not in data and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if missing:
        raise TypeError(f"missing field {missing[0]!r} for {cls.__name__}")
    return cls(**data)


def dump(cls: type, payload: Any) -> Any:
    """The JSON form of `payload` (an instance of `cls`, or a dict of its fields), validated."""
    if _is_pydantic(cls):
        obj: Any = payload if isinstance(payload, cls) else cls.model_validate(payload)  # type: ignore[attr-defined]
        return obj.model_dump(mode="json")
    if isinstance(payload, cls):
        data = {f.name: getattr(payload, f.name) for f in dataclasses.fields(cls)}
    elif isinstance(payload, dict):
        data = payload
    else:
        raise TypeError(f"expected a {cls.__name__} or a dict of its fields, got {type(payload).__name__}")
    build(cls, data)  # the same check the worker makes, so what is stored can be rebuilt
    return data


_RUNNERS: dict[Callable[..., Any], Callable[..., Any]] = {}  # one per handler: registering it again is no conflict


def runner_for(func: Callable[..., Any]) -> Callable[..., Any]:
    """What the worker calls: `func` itself, or for a typed payload a function that builds it first."""
    cls = payload_type(func)
    if cls is None:
        return func
    if func in _RUNNERS:
        return _RUNNERS[func]

    @functools.wraps(func)
    def run_typed(payload: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            obj = build(cls, payload)
        except Exception as exc:  # pydantic's ValidationError is a ValueError; ours TypeError
            # an old job or a changed type: retrying cannot help, so dead with the reason
            raise PermanentFailure(f"stored payload no longer fits {cls.__name__}: {exc}") from exc
        return func(obj, *args, **kwargs)

    _RUNNERS[func] = run_typed
    return run_typed


class TaskHandle:
    """What `@task` returns: the handler (still callable as before) plus typed enqueue methods."""

    def __init__(self, queue: str, func: Callable[..., Any]) -> None:
        self.queue = queue
        self.func = func
        self.payload_type = payload_type(func)
        functools.update_wrapper(self, func)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<skiplock task {self.queue!r}: {getattr(self.func, '__qualname__', self.func)!r}>"

    def _serialised(self, payload: Any) -> Any:
        if self.payload_type is None:
            return payload
        try:
            return dump(self.payload_type, payload)
        except (TypeError, ValueError) as exc:
            raise EnqueueError(f"{self.queue!r} payload refused: {exc}") from None

    def enqueue(self, payload: Any, *, conn: Any = None, priority: int = 0,
                run_at: datetime | None = None, delay: float | timedelta | None = None,
                unique_key: str | None = None, max_attempts: int | None = None, on_conflict: str = "ignore",
                lock_key: str | None = None, tenant: str | None = None, depends_on: Iterable[int] | None = None,
                on_dependency_failure: str = "dead") -> int | None:
        """skiplock.enqueue on this task's queue, the payload validated first (see the module doc)."""
        return enqueue(self.queue, self._serialised(payload), conn=conn, priority=priority, run_at=run_at,
                       delay=delay, unique_key=unique_key, max_attempts=max_attempts, on_conflict=on_conflict,
                       lock_key=lock_key, tenant=tenant, depends_on=depends_on,
                       on_dependency_failure=on_dependency_failure)

    def enqueue_many(self, payloads: Iterable[Any], *, conn: Any = None,
                     **options: Any) -> list[int]:
        """skiplock.enqueue_many on this queue; `options` (priority, delay, ...) apply to every job."""
        jobs = []
        for index, payload in enumerate(payloads):
            try:
                jobs.append({"queue": self.queue, "payload": self._serialised(payload), **options})
            except EnqueueError as exc:
                raise EnqueueError(f"job #{index}: {exc}") from None
        return enqueue_many(jobs, conn=conn)

    async def enqueue_async(self, payload: Any, *, conn: Any = None, priority: int = 0,
                            run_at: datetime | None = None, delay: float | timedelta | None = None,
                            unique_key: str | None = None, max_attempts: int | None = None,
                            on_conflict: str = "ignore", lock_key: str | None = None,
                            tenant: str | None = None, depends_on: Iterable[int] | None = None,
                            on_dependency_failure: str = "dead") -> int | None:
        """skiplock.enqueue_async on this task's queue, the payload validated first."""
        return await enqueue_async(self.queue, self._serialised(payload), conn=conn, priority=priority,
                                   run_at=run_at, delay=delay, unique_key=unique_key, max_attempts=max_attempts,
                                   on_conflict=on_conflict, lock_key=lock_key, tenant=tenant,
                                   depends_on=depends_on, on_dependency_failure=on_dependency_failure)
