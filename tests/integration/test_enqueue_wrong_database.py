"""enqueue() against a DATABASE_URL that can never work says why at once: the server's reason in one
ConfigError, not a PoolTimeout without a cause after the pool's 10 s."""

from __future__ import annotations

import pytest
from psycopg.conninfo import make_conninfo

from skiplock import enqueue
from skiplock.core.errors import ConfigError
from skiplock.core.producer import close_default_pool


def test_enqueue_to_a_database_that_does_not_exist_names_the_cause(pg_admin_url: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    close_default_pool()
    monkeypatch.setenv("DATABASE_URL", make_conninfo(pg_admin_url, dbname="skiplock_no_such_database"))
    try:
        with pytest.raises(ConfigError) as refused:
            enqueue("emails", {"to": "ada@example.com"})
        assert 'database "skiplock_no_such_database" does not exist' in str(refused.value)
    finally:
        close_default_pool()
