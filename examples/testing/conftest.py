import pytest

pytest_plugins = ["skiplock.testing"]


@pytest.fixture
def db(skiplock_conn):
    """The emptied skiplock test database, plus the application's own table."""
    skiplock_conn.execute("CREATE TABLE IF NOT EXISTS signups (email text PRIMARY KEY)")
    skiplock_conn.execute("TRUNCATE signups")
    return skiplock_conn
