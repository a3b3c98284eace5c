"""`skiplock.hooks`, the public path of `FailedRun` (docs/reference/api.md): a re-export.

The error hooks live in the queue core, worker/core/features/hooks.py; `skiplock.on_failure` and `skiplock.on_dead` are
exported by `skiplock` itself.
"""

from skiplock.core.features.hooks import FailedRun, on_dead, on_failure

__all__ = ["FailedRun", "on_dead", "on_failure"]
