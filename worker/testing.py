"""`skiplock.testing`, the public path of the test helpers (docs/reference/api.md): a re-export.

The code lives in the tools layer, worker/tools/testing.py. This module stays because applications name it:
`pytest -p skiplock.testing`, `pytest_plugins = ["skiplock.testing"]`, `from skiplock.testing import drain`.
pytest reads a plugin's fixtures from the module's attributes, so the three fixtures are re-exported too.
"""

from skiplock.tools.testing import (
    DrainedJob,
    DrainLimitExceeded,
    EnqueuedJob,
    SimulatedCrash,
    assert_enqueued,
    drain,
    enqueued_jobs,
    run_durable,
    skiplock_conn,
    skiplock_database_url,
    skiplock_db,
)

__all__ = ["DrainLimitExceeded", "DrainedJob", "EnqueuedJob", "SimulatedCrash", "assert_enqueued", "drain",
           "enqueued_jobs", "run_durable", "skiplock_conn", "skiplock_database_url", "skiplock_db"]
