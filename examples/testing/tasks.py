"""The application's handlers (what SKIPLOCK_TASKS names in production)."""

from skiplock import PermanentFailure, RetryAfter, task

SENT: list[str] = []  # stands in for the mail server
FLAKY_CALLS: list[int] = []


@task("emails")
def send_welcome(payload, job):
    if payload["to"].endswith("@invalid"):
        raise PermanentFailure(f"cannot deliver to {payload['to']}")
    if payload.get("flaky") and job.attempt == 1:
        FLAKY_CALLS.append(job.attempt)
        raise RetryAfter(0, "mail server busy")  # due at once: drain() runs the retry too
    SENT.append(payload["to"])
