"""`skiplock.recurring_defs`, the public path of the schedule functions (docs/reference/api.md): a re-export.

Recurring definitions live in the services layer, worker/services/recurring_defs.py; `skiplock.recurring` is
exported by `skiplock` itself.
"""

from skiplock.services.recurring_defs import (
    define,
    list_schedules,
    pause_schedule,
    recurring,
    resume_schedule,
    run_schedule_now,
)

__all__ = ["define", "list_schedules", "pause_schedule", "recurring", "resume_schedule", "run_schedule_now"]
