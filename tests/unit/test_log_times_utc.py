"""The worker's log lines carry UTC times, as the console shows them, whatever the process's time zone
(Django sets TZ from its TIME_ZONE when the worker sets it up)."""

from __future__ import annotations

import io
import logging
import os
import time

from skiplock.core.plumbing import logs


def test_text_log_times_are_utc_under_another_time_zone(monkeypatch) -> None:
    monkeypatch.setenv("TZ", "Asia/Tokyo")  # what django.setup() does with TIME_ZONE = "Asia/Tokyo"
    time.tzset()
    try:
        logs.configure_logging("text", "INFO")
        stream = io.StringIO()
        handler = logging.getLogger().handlers[0]
        handler.setStream(stream)  # type: ignore[attr-defined]
        record = logging.LogRecord("skiplock.worker", logging.INFO, __file__, 1, "claimed", None, None)
        record.created = 0.0  # 1970-01-01 00:00 UTC, 09:00 in Tokyo
        record.msecs = 0.0
        handler.handle(record)
        assert stream.getvalue().startswith("1970-01-01 00:00:00.000Z INFO    skiplock.worker: claimed")
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
        os.environ.pop("TZ", None)
