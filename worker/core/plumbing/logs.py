"""Log setup: readable lines by default, one JSON object per line with SKIPLOCK_LOG_FORMAT=json."""

from __future__ import annotations

import json
import logging
import sys
import time
from datetime import UTC, datetime

# Extra fields a job log line may carry; both formats show them.
JOB_FIELDS = ("job_id", "queue", "attempt", "outcome", "duration_ms", "worker_id")


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message and any job fields."""

    def format(self, record: logging.LogRecord) -> str:
        data = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in JOB_FIELDS:
            if hasattr(record, name):
                data[name] = getattr(record, name)
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str)


class UtcFormatter(logging.Formatter):
    """The text format, its times in UTC with a Z, as the console shows them: the local time zone can be
    anyone's (Django sets TZ to its TIME_ZONE when it is set up), and two clocks mislead at 2 a.m."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"


def configure_logging(fmt: str = "text", level: str = "INFO") -> None:
    """Send skiplock's logs to stderr in the chosen format (idempotent)."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(UtcFormatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    root = logging.getLogger()
    # a handler that routes records elsewhere (the job's own log lines, worker/runtime/job_logs.py) stays
    root.handlers[:] = [handler, *(h for h in root.handlers if getattr(h, "kept_on_reconfigure", False))]
    root.setLevel(level)
    # APScheduler logs every run at INFO; that is noise next to our own job lines.
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
