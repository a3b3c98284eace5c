"""`@task("emails")`: registers the decorated function as the queue's handler and returns its TaskHandle.

Above the task table (core/registry.py) and the producer: the handle it returns enqueues through them
(core/typed.py), and the table itself imports neither (so no loop producer -> registry -> typed -> producer).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from skiplock.core import batch_handlers, typed
from skiplock.core.errors import ConfigError
from skiplock.core.features import limits, versions
from skiplock.core.registry import REGISTRY, TASK_OPTIONS, Task, qualname


def task(
    queue: str,
    *,
    lease: float | None = None,
    max_attempts: int | None = None,
    version: int = 1,
    upgrade: dict[int, Callable[[Any], Any]] | None = None,
    lock_key: str | Callable[[Any], str | None] | None = None,
    concurrency: int | None = None,
    rate: float | str | None = None,
    batch_size: int | None = None,
    batch_wait: float | None = None,
    **options: Any,
) -> Callable[[Callable[..., Any]], typed.TaskHandle]:
    """Register the decorated function as the handler of `queue`.

    The function takes the payload, and may declare `job` to receive a JobContext. It may be an
    `async def`: the worker then awaits it on its own event loop (SKIPLOCK_ASYNC_CONCURRENCY). `lease`
    overrides the lease length for this queue. Extra keywords (e.g. `every="5m"`) are passed to
    option hooks such as recurring schedules; unknown ones are an error.
    Flow control: `version` and `upgrade={1: fn, ...}` version the payload (old jobs are
    upgraded step by step before the call); `lock_key` (a string or fn(payload)) serializes jobs
    per key; `concurrency` and `rate` ("100/s", "10/m" or a number per second) are global limits.
    Batches: with `batch_size`, the function takes `(payloads, jobs)`, two lists, and is called with up
    to `batch_size` jobs at once, waiting at most `batch_wait` seconds (default 1) for the batch to fill
    (core/batch_handlers.py).
    """
    if not isinstance(queue, str) or not queue.strip():
        raise ConfigError("@task needs a non-empty queue name")
    upgrades = versions.check_upgrades(queue, version, upgrade)
    per_second = limits.parse_rate(rate) if rate is not None else None
    if concurrency is not None:
        limits.check_concurrency(concurrency)
    if lock_key is not None and not (callable(lock_key) or (isinstance(lock_key, str) and lock_key)):
        raise ConfigError(f"@task({queue!r}): lock_key must be a non-empty string or a function of the payload")
    if batch_size is None and batch_wait is not None:
        raise ConfigError(f"@task({queue!r}): batch_wait needs batch_size (a handler that takes a batch)")
    batch = batch_handlers.check_options(queue, batch_size, 1.0 if batch_wait is None else batch_wait) \
        if batch_size is not None else None

    def decorate(func: Callable[..., Any]) -> typed.TaskHandle:
        if batch is not None:
            # a batch handler gets its jobs' JobContexts, so its claims include their context columns
            batch_handlers.check_signature(queue, func)
            wants_job, runner = True, func
        else:
            wants_job = _check_signature(func)
            # a dataclass/pydantic payload is built before the call (worker/core/typed.py); else `func` itself
            runner = typed.runner_for(func)
        REGISTRY.add(Task(queue, runner, wants_job, lease, max_attempts, dict(options),
                          is_async=inspect.iscoroutinefunction(func), version=version, upgrade=upgrades,
                          lock_key=lock_key, concurrency=concurrency, rate=per_second,
                          batch_size=batch[0] if batch else None, batch_wait=batch[1] if batch else 0.0))
        for key, value in options.items():
            hook = TASK_OPTIONS.get(key)
            if hook is None:
                raise ConfigError(f"@task({queue!r}) got an unknown option {key!r}")
            hook(queue, func, value)
        return typed.TaskHandle(queue, func)  # callable like `func`, plus .enqueue/.enqueue_many

    return decorate


def _check_signature(func: Callable[..., Any]) -> bool:
    """Refuse a handler the worker could not call; return whether it takes `job`.

    The worker calls `func(payload)`, or `func(payload, job=context)` when it declares `job`. Any other
    required parameter (`def h(payload, ctx)`) would fail every run with a TypeError, so it is refused
    here, when the module is imported, and not when the first job runs. Both the signature a decorator
    reports (functools.wraps) and the wrapper's own must accept that call.
    """
    try:
        shown = inspect.signature(func)
        own = inspect.signature(func, follow_wrapped=False)
    except (TypeError, ValueError):  # a callable without a readable signature: checked when it runs
        return False
    wants_job = "job" in shown.parameters
    positional = [p for p in shown.parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "job"]
    if not positional and not any(p.kind == p.VAR_POSITIONAL for p in shown.parameters.values()):
        raise ConfigError(f"handler {qualname(func)} must take the payload as its first argument")
    call = "(payload, job=context)" if wants_job else "(payload)"
    for signature in (shown, own):
        try:
            signature.bind(None, job=None) if wants_job else signature.bind(None)
        except TypeError as exc:
            raise ConfigError(
                f"handler {qualname(func)}{signature} cannot be called as {qualname(func)}{call}: {exc}. "
                "A handler takes the payload, and may declare a parameter named `job` for the JobContext "
                "(def handler(payload, job): ...); give any other parameter a default") from None
    return wants_job
