"""A job's failed attempts for its page, with repeats collapsed: a job that fails the same way on every
attempt stores the same traceback up to 20 times (jobs.attempt_errors), and listed one by one they bury the
page, on a phone most of all. Attempts whose error text is identical become one entry: the traceback once,
with how many times and each attempt's time, worker and duration."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class AttemptGroup:
    """Attempts that failed with the same error text, newest first."""

    error: str
    attempts: list[dict[str, Any]] = field(default_factory=list)  # attempt_errors entries, newest first

    @property
    def count(self) -> int:
        return len(self.attempts)

    @property
    def newest(self) -> dict[str, Any]:
        return self.attempts[0]

    @property
    def numbers(self) -> str:
        """The attempts' numbers, newest first, consecutive ones as ranges (en dash): "20-3", "7, 5, 2-1"."""
        nums = [int(a.get("attempt") or 0) for a in self.attempts]
        runs: list[list[int]] = []
        for n in nums:
            if runs and runs[-1][-1] - 1 == n:
                runs[-1].append(n)
            else:
                runs.append([n])
        return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}\u2013{r[-1]}" for r in runs)


def group(attempt_errors: list[Any] | None) -> list[AttemptGroup]:
    """The entries of attempt_errors (oldest first, as stored) as groups of identical errors, the group
    with the newest attempt first; inside a group, newest first."""
    groups: dict[str, AttemptGroup] = {}
    for entry in reversed([e for e in (attempt_errors or []) if isinstance(e, dict)]):
        text = str(entry.get("error") or "")
        groups.setdefault(text, AttemptGroup(text)).attempts.append(entry)
    return list(groups.values())  # insertion order: by each group's newest attempt
