"""The overview's "What changed?": one sentence on what is unusual now against the last 24 hours, with links
to the evidence. A queue whose failure rate of the last hour is well above its own usual rate, and error
groups that appeared in the last hour and not in the 24 hours before. Loaded by the overview as a fragment
(/changed), so the overview itself stays fast."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from flask import Blueprint
from flask.typing import ResponseReturnValue

from skiplock.webapp import db
from skiplock.webapp.queries import page_queries
from skiplock.webapp.web import page

bp = Blueprint("changed", __name__, url_prefix="/changed")

MIN_FAILURES = 5  # fewer failures in an hour is never "unusual"
RATIO = 2.0  # unusual: at least twice the usual rate...
MARGIN = 0.01  # ...and at least one percentage point above it
NEW_GROUPS_SCAN = 5_000
NEW_GROUPS_NAMED = 5  # the sentence names this many new groups and counts the rest


@dataclass(frozen=True)
class RateChange:
    """A queue failing more than it usually does."""

    queue: str
    rate: float
    usual: float | None  # None: no runs in the 24 hours before
    since: datetime | None
    failures: int


@dataclass(frozen=True)
class NewGroup:
    """An error group first seen in the last hour."""

    queue: str
    error: str
    first_at: datetime
    n: int


def unusual_rates(rows: list[tuple[str, int, int, int, int, datetime | None]]) -> list[RateChange]:
    """The queues whose last-hour failure rate is unusual against their 24 hours before.

    >>> [c.queue for c in unusual_rates([("emails", 100, 12, 10000, 30, None), ("sms", 100, 1, 1000, 10, None)])]
    ['emails']
    """
    out = []
    for queue, runs, fails, runs_before, fails_before, since in rows:
        if not runs or fails < MIN_FAILURES:
            continue
        rate = fails / runs
        usual = fails_before / runs_before if runs_before else None
        if usual is None or (rate >= usual * RATIO and rate >= usual + MARGIN):
            out.append(RateChange(queue, rate, usual, since, int(fails)))
    return sorted(out, key=lambda c: -c.failures)


@bp.route("/")
def index() -> ResponseReturnValue:
    """The "What changed?" sentence (a fragment the overview loads)."""
    with db.connection() as conn:
        rates = unusual_rates([tuple(r) for r in conn.execute(page_queries.CHANGED_RATES)])
        groups = [NewGroup(q, e, at, int(n)) for q, e, at, n in
                  conn.execute(page_queries.CHANGED_NEW_GROUPS, {"scan": NEW_GROUPS_SCAN})]
    return page("changed/changed.html", "changed/_changed.html", rates=rates, groups=groups[:NEW_GROUPS_NAMED],
                new_groups=len(groups))
