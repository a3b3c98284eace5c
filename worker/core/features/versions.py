"""Payload versions: `@task("q", version=2, upgrade={1: v1_to_v2})`.

A job is stamped at enqueue with its task's version (jobs.version). A worker claims only jobs of a
version it knows (the claim's `j.version <= wanted.version`): a job from a newer producer than
this worker is not claimed at all, so it is neither failed nor retried nor held; it stays queued
for a worker that knows its version, and `skiplock doctor` warns while no live worker does.
An older payload is upgraded one version at a time before the handler sees it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from skiplock.core.errors import ConfigError, PermanentFailure

Upcaster = Callable[[Any], Any]


def check_upgrades(queue: str, version: object, upgrade: Mapping[int, Upcaster] | None) -> dict[int, Upcaster]:
    """Validate @task's version and upgrade= at import time; return the upcasters by source version.

    Every version below `version` needs a step (1 -> 2 -> ... -> version), unless none is given:
    a task that never had older payloads declares no upgrade at all.
    """
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ConfigError(f"@task({queue!r}): version must be a whole number >= 1, got {version!r}")
    steps = dict(upgrade or {})
    for source, step in steps.items():
        if isinstance(source, bool) or not isinstance(source, int) or not 1 <= source < version:
            raise ConfigError(f"@task({queue!r}): upgrade keys are the versions an upcaster starts from, "
                              f"1..{version - 1}; got {source!r}")
        if not callable(step):
            raise ConfigError(f"@task({queue!r}): upgrade[{source}] must be a function of the payload")
    missing = [v for v in range(1, version) if v not in steps]
    if steps and missing:
        raise ConfigError(f"@task({queue!r}, version={version}): no upgrade from version(s) "
                          f"{', '.join(map(str, missing))}; each step v -> v+1 needs a function")
    return steps


def upgrade_payload(queue: str, payload: Any, job_version: int | None, task_version: int,
                    steps: Mapping[int, Upcaster]) -> Any:
    """`payload` (of `job_version`) brought to `task_version` by the task's upcasters, in order.

    >>> upgrade_payload("q", {"n": 1}, 1, 3, {1: lambda p: {**p, "v2": True}, 2: lambda p: {**p, "v3": True}})
    {'n': 1, 'v2': True, 'v3': True}

    A job without a version (None) or of the task's own version is returned as it is. A version
    with no upcaster is a PermanentFailure: retrying cannot make the step appear.
    """
    if job_version is None or job_version >= task_version:
        return payload
    for source in range(job_version, task_version):
        step = steps.get(source)
        if step is None:
            raise PermanentFailure(f"queue {queue!r}: a version {job_version} payload, but the handler takes "
                                   f"version {task_version} and has no upgrade from version {source}")
        payload = step(payload)
    return payload
