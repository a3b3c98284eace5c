"""The public import paths of docs/reference/api.md that are re-exports since issue 37 hand out the very objects
of the modules that hold them, and `pytest -p skiplock.testing` still finds the plugin's fixtures."""

from __future__ import annotations

import skiplock
import skiplock.hooks
import skiplock.producer_async
import skiplock.recurring_defs
import skiplock.testing
from skiplock.core import producer_async
from skiplock.core.features import hooks
from skiplock.services import recurring_defs
from skiplock.tools import testing, testing_fixtures


def test_each_public_path_re_exports_the_objects_of_its_module() -> None:
    pairs = [(skiplock.hooks, hooks), (skiplock.producer_async, producer_async),
             (skiplock.recurring_defs, recurring_defs), (skiplock.testing, testing)]
    for public, home in pairs:
        assert public.__all__, public.__name__
        for name in public.__all__:
            source = testing_fixtures if public is skiplock.testing and name.startswith("skiplock_") else home
            assert getattr(public, name) is getattr(source, name), f"{public.__name__}.{name}"


def test_the_testing_plugin_module_carries_its_fixtures() -> None:
    fixtures = {"skiplock_database_url", "skiplock_db", "skiplock_conn"}
    assert fixtures <= set(skiplock.testing.__all__)
    assert skiplock.on_failure is skiplock.hooks.on_failure and skiplock.enqueue_async is producer_async.enqueue_async
