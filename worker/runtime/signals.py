"""The events the worker's parts signal each other with: stop, wake the claim loop, stopped claiming.

The claimer (worker/runtime/claimer.py), the executor (worker/runtime/executor.py) and the shutdown
(worker/runtime/shutdown.py) share one Signals; the Worker (worker/runtime/runner.py) makes it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass
class Signals:
    """One worker's shared events and flags."""

    stop: threading.Event = field(default_factory=threading.Event)  # a graceful shutdown has begun
    wake: threading.Event = field(default_factory=threading.Event)  # the claim loop should look for work now
    stopped_claiming: threading.Event = field(default_factory=threading.Event)  # no job is started any more
    # an operator's "quiet" (worker/core/features/worker_control.py): claim nothing more, let running jobs finish
    quiet: threading.Event = field(default_factory=threading.Event)
    # set at the very end of shutdown: stops the acker and the heartbeat threads
    acker_done: threading.Event = field(default_factory=threading.Event)
    skip_grace: bool = False  # a second stop request: do not wait for running handlers
    # set by the listener's claim or hand-off: the next handler thread to start a job wakes the claim loop
    wake_on_start: bool = False
    # what the worker exits with: ENVIRONMENT_EXIT_CODE once a handler found the process not set up
    # (worker/runtime/environment.py); 0 otherwise
    exit_code: int = 0

    def may_claim(self) -> bool:
        """Whether any path may claim or start a new job: not stopping, not stopped, not quieted.

        Every claim path asks this one question (the claim loop, the listener's claim on a NOTIFY,
        a producer's hand-off), so a quiet or a stop cannot be missed by one of them."""
        return not (self.stop.is_set() or self.quiet.is_set() or self.stopped_claiming.is_set())

