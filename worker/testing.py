"""`skiplock.testing`, the public path of the test helpers (docs/reference/api.md): a re-export.

The code lives in the tools layer, worker/tools/testing.py. This module stays because applications name it:
`pytest -p skiplock.testing`, `pytest_plugins = ["skiplock.testing"]`, `from skiplock.testing import drain`.
pytest reads a plugin's fixtures from the module's attributes, so the three fixtures are re-exported too,
when pytest is installed: the functions work without it (an application's runtime rarely has pytest).
"""

import importlib.util

from skiplock.tools.testing import (
    DrainedJob,
    DrainLimitExceeded,
    EnqueuedJob,
    SimulatedCrash,
    assert_enqueued,
    drain,
    enqueued_jobs,
    run_durable,
)

__all__ = ["DrainLimitExceeded", "DrainedJob", "EnqueuedJob", "SimulatedCrash", "assert_enqueued", "drain",
           "enqueued_jobs", "run_durable"]

if importlib.util.find_spec("pytest") is not None:  # the fixtures are pytest's; the functions are not
    from skiplock.tools.testing_fixtures import skiplock_conn, skiplock_database_url, skiplock_db

    __all__ = [*__all__, "skiplock_conn", "skiplock_database_url", "skiplock_db"]
