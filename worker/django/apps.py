"""The Django app `skiplock.django`: its migration installs skiplock's schema, its command runs the worker."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class SkiplockConfig(AppConfig):
    """`INSTALLED_APPS += ["skiplock.django"]`; the label is `skiplock` (`manage.py migrate skiplock`)."""

    name = "skiplock.django"
    label = "skiplock"
    verbose_name = "skiplock"
    default = True

    def ready(self) -> None:
        post_migrate.connect(_upgrade_schema, sender=self, dispatch_uid="skiplock-schema")


def _upgrade_schema(sender: Any, using: str = "default", **kwargs: Any) -> None:
    # a newer skiplock's SQL migrations, on a database whose Django migration ran with an older one
    from skiplock.django.schema import install

    install(using)  # applies nothing when the schema is current
