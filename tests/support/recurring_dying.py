"""A recurring definition whose every run dies: `charge-renewals` fires every second on queue `rdie`
and its handler raises PermanentFailure, so each run ends dead at once (issue 36, defect 2)."""

from typing import Any

from skiplock import PermanentFailure, task
from skiplock.services.recurring_defs import recurring


@task("rdie")
def charge_renewals(payload: Any) -> None:
    raise PermanentFailure("payment provider rejected the API key")


recurring("charge-renewals", queue="rdie", every="1s", payload={"batch": "renewals"})
