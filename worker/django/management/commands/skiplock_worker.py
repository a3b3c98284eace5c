"""`python manage.py skiplock_worker`: a skiplock worker for this project's Django tasks.

Django is set up by manage.py before this runs (the project's folder is on sys.path as manage.py's
own). The worker works the queues of a TASKS backend that is skiplock's (`--backend`, default
"default"), or those of `--queues`; it also runs skiplock's own @task handlers of SKIPLOCK_TASKS.
SIGTERM or Ctrl-C stop it gracefully: no new claims, running tasks get the shutdown grace to finish,
the rest go back to their queue at once.
"""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = "Run a skiplock worker for this project's tasks (django.tasks on skiplock)."
    # the worker opens its own connections; Django's system checks ran with manage.py's own setup
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--backend", default="default", help="the TASKS alias to work (default: default)")
        parser.add_argument("--queues", help="comma-separated queues to work (default: the backend's QUEUES)")
        parser.add_argument("--concurrency", type=int, help="handler threads (SKIPLOCK_CONCURRENCY)")
        parser.add_argument("--batch-size", type=int, help="most jobs per claim (SKIPLOCK_BATCH_SIZE)")
        parser.add_argument("--poll-interval", type=float, help="seconds between idle polls")
        parser.add_argument("--shutdown-grace", type=float, help="seconds running tasks get on SIGTERM")
        parser.add_argument("--health-port", type=int, help="serve /healthz and /metrics here")
        parser.add_argument("--migrate", action="store_true", help="apply skiplock's migrations first")

    def handle(self, *args: Any, **options: Any) -> None:
        from skiplock.core.errors import SkiplockError
        from skiplock.django.worker import WorkerOptions, run_worker

        try:
            code = run_worker(WorkerOptions.from_command(options))
        except SkiplockError as exc:
            raise CommandError(str(exc)) from None
        if code:
            sys.exit(code)
