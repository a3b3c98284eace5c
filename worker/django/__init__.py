"""skiplock as the production backend of Django's task framework (`django.tasks`, or the `django-tasks`
backport on Django 4.2-5.2).

    INSTALLED_APPS += ["skiplock.django"]
    TASKS = {"default": {"BACKEND": "skiplock.django.SkiplockBackend", "QUEUES": ["default", "emails"],
                         "OPTIONS": {"DATABASE": "default", "max_attempts": 5}}}

`python manage.py migrate` installs skiplock's schema into that database; `python manage.py skiplock_worker`
runs the tasks. Nothing here is imported before it is used: `skiplock.django` is an app label first, and
Django's settings must be configured before the backend module imports the task framework.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SkiplockBackend", "SkiplockTaskContext", "enqueue_options"]


def __getattr__(name: str) -> Any:
    # import_string("skiplock.django.SkiplockBackend") lands here: the backend module needs Django's
    # settings, which are not configured yet when INSTALLED_APPS imports this package
    if name == "SkiplockBackend":
        from skiplock.django.backend import SkiplockBackend

        return SkiplockBackend
    if name == "SkiplockTaskContext":
        from skiplock.django.context import SkiplockTaskContext

        return SkiplockTaskContext
    if name == "enqueue_options":
        from skiplock.django.options import enqueue_options

        return enqueue_options
    raise AttributeError(f"module 'skiplock.django' has no attribute {name!r}")
