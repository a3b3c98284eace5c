"""A recurring definition for worker-process tests: `tick` fires every second on queue `rtick`.

Workers load it with SKIPLOCK_TASKS=tests.support.handlers,tests.support.recurring_handlers; each run records
one test_effects row (tests.support.handlers.behave), so tests count runs per slot.
"""

from skiplock import task
from skiplock.services.recurring_defs import recurring
from tests.support.handlers import behave

task("rtick")(behave)
recurring("tick", queue="rtick", every="1s", payload={"tick": True})
