"""The timeline's reading of a job's record where it is silent (webapp/shared/timeline.py), and the edit's diff
(worker/core/payload_edit.py): pure functions, fed the shapes the database returns."""

from __future__ import annotations

import doctest
from datetime import UTC, datetime, timedelta
from typing import Any

from skiplock.core.features import payload_edit
from skiplock.webapp.shared import timeline

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _entry(attempt: int, seconds: float, started: bool = True) -> dict[str, Any]:
    at = T0 + timedelta(seconds=seconds)
    entry = {"attempt": attempt, "worker": "w1", "at": at.isoformat(), "duration_ms": 500.0,
             "error": f"Traceback (most recent call last):\n  File \"x\", line 1\nValueError: run {attempt}"}
    if started:
        entry["started"] = (at - timedelta(seconds=1)).isoformat()
    return entry


def _job(status: str, attempts: int, entries: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"status": status, "attempts": attempts, "max_attempts": 20, "attempt_errors": entries,
            "created_at": T0, "started_at": T0 + timedelta(seconds=90), "finished_at": None, "worker_id": "w2",
            "run_at": T0, "scheduled": False, "now": T0 + timedelta(seconds=95), **extra}


def _shape(steps: list[timeline.Step]) -> list[tuple[str, int | None]]:
    return [(s.kind, s.attempt) for s in steps]


def test_a_plain_retry_after_death_shows_where_the_attempts_restart() -> None:
    job = _job("running", 1, [_entry(1, 10), _entry(2, 20)])
    steps = timeline.build(job, [])
    assert _shape(steps) == [("enqueued", None), ("attempt", 1), ("attempt", 2), ("retry", None), ("attempt", 1)]
    assert steps[-1].state == timeline.RUNNING and steps[-1].worker == "w2" and steps[-1].duration_s == 5.0
    assert steps[1].error == "ValueError: run 1"


def test_a_retry_between_recorded_runs_and_an_edit_are_placed_in_order() -> None:
    edit = {"id": 7, "at": T0 + timedelta(seconds=35), "actor": "ops"}
    job = _job("queued", 1, [_entry(1, 10), _entry(1, 30), _entry(1, 40)], scheduled=True)
    steps = timeline.build(job, [edit])
    assert _shape(steps) == [("enqueued", None), ("attempt", 1), ("retry", None), ("attempt", 1), ("edit", None),
                             ("attempt", 1), ("next", None)]
    assert steps[-1].title == "attempt 2" and steps[-1].note == "scheduled"


def test_truncated_history_missing_runs_and_estimated_starts_are_said() -> None:
    job = _job("dead", 6, [_entry(4, 10, started=False), _entry(5, 20)], finished_at=T0 + timedelta(seconds=60))
    steps = timeline.build(job, [])
    assert _shape(steps) == [("enqueued", None), ("lost", None), ("attempt", 4), ("attempt", 5), ("lost", 6),
                             ("final", None)]
    assert "not kept" in (steps[1].note or "") and steps[1].title == "attempts 1\u20133"
    assert steps[2].estimated and steps[2].at == T0 + timedelta(seconds=9.5)  # the ack's time minus 500 ms
    assert not steps[3].estimated and steps[3].at == T0 + timedelta(seconds=19)
    assert "reaper" in (steps[4].note or "") and steps[5].state == timeline.DEAD


def test_the_edit_diff_names_paths_and_is_bounded() -> None:
    assert doctest.testmod(payload_edit).failed == 0
    changes = payload_edit.diff({"items": [1, 2], "a b": "x"}, {"items": [1, 3], "a b": "y" * 500})
    assert changes[0] == {"path": '$["a b"]', "old": '"x"', "new": changes[0]["new"]}
    assert len(changes[0]["new"]) == payload_edit.DIFF_VALUE_CHARS and changes[0]["new"].endswith("\u2026")
    assert changes[1] == {"path": "$.items[1]", "old": "2", "new": "3"}
    many = payload_edit.diff({f"k{i}": i for i in range(80)}, {f"k{i}": -i - 1 for i in range(80)})
    assert len(many) == payload_edit.MAX_DIFF_ENTRIES
    assert payload_edit.diff([1], {"a": 1}) == [{"path": "$", "old": "[1]", "new": '{"a": 1}'}]
