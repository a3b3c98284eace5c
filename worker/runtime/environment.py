"""The worker's environment: frameworks set up before the task modules load, and the errors that
say the environment (not the job) is broken.

Django first: a task module that imports models, or a handler that uses the ORM, needs
`django.setup()` to have run in the worker process. When DJANGO_SETTINGS_MODULE is set, the worker
does that before it imports SKIPLOCK_TASKS, as Celery's and Procrastinate's Django integrations do.
Django is an optional extra, imported only then.

A handler that fails because the environment is broken (Django's AppRegistryNotReady or
ImproperlyConfigured) would fail the same way for every job and every retry: retried with backoff
it shows up as dead hours later. The worker treats it as its own error instead: it stops, puts the
job back without counting the attempt, and exits non-zero with the reason (worker/runtime/runner.py).
"""

from __future__ import annotations

import os
import sys

from skiplock.core.errors import ConfigError

# (module, class) of the exceptions that mean "this process is not set up", looked up in sys.modules
# only: a library that was never imported cannot have raised one of its exceptions.
ENVIRONMENT_ERRORS = (
    ("django.core.exceptions", "AppRegistryNotReady"),  # models used before django.setup()
    ("django.core.exceptions", "ImproperlyConfigured"),  # settings missing or wrong
)


def setup_frameworks() -> str | None:
    """Set Django up when DJANGO_SETTINGS_MODULE is set; return what was set up (for the log), or None.

    ConfigError, naming the variable and the cause, when it cannot be done: the worker must not start.
    """
    settings_module = os.environ.get("DJANGO_SETTINGS_MODULE", "").strip()
    if not settings_module:
        return None
    # `skiplock worker` is a console script, whose sys.path starts at its bin folder: the project's folder
    # (where mysite/settings.py is) must be importable before Django reads the settings, as it is for
    # the task modules (skiplock.core.registry.import_task_modules)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        import django
    except ImportError:
        raise ConfigError(f"DJANGO_SETTINGS_MODULE={settings_module} is set but Django is not installed: "
                          "pip install 'skiplock[django]', or unset the variable") from None
    try:
        django.setup()
    except Exception as exc:
        raise ConfigError(f"cannot set Django up (DJANGO_SETTINGS_MODULE={settings_module}): "
                          f"{type(exc).__name__}: {exc}") from None
    return f"Django {django.get_version()} ({settings_module})"


def broken_environment(exc: BaseException) -> str | None:
    """The reason `exc` says the worker's environment is broken, or None for an ordinary job failure."""
    for module, name in ENVIRONMENT_ERRORS:
        cls = getattr(sys.modules.get(module), name, None)
        if cls is not None and isinstance(exc, cls):
            hint = ("" if os.environ.get("DJANGO_SETTINGS_MODULE")
                    else "; set DJANGO_SETTINGS_MODULE so the worker sets Django up before it imports the tasks")
            return f"{module.split('.')[0].title()}'s {name}: {exc}{hint}"
    return None
