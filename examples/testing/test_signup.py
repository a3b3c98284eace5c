import psycopg
import pytest
import tasks
from app import create_app

import skiplock
from skiplock.testing import assert_enqueued, drain, enqueued_jobs


@pytest.fixture
def client(db):
    app = create_app()
    app.config["TESTING"] = True
    return app.test_client()


def test_signup_enqueues_the_welcome_email_in_its_transaction(client, db):
    response = client.post("/signup", data={"email": "ada@example.com"})
    assert response.status_code == 201
    assert_enqueued("emails", {"to": "ada@example.com"})
    assert db.execute("SELECT count(*) FROM signups").fetchone()[0] == 1


def test_a_failed_signup_enqueues_nothing(client, db):
    with pytest.raises(RuntimeError):
        client.post("/signup", data={"email": "bob@example.com", "fail": "1"})
    assert enqueued_jobs("emails") == []
    assert db.execute("SELECT count(*) FROM signups").fetchone()[0] == 0


def test_the_handler_sends_retries_and_gives_up(db):
    tasks.SENT.clear()
    skiplock.enqueue("emails", {"to": "ada@example.com"})
    skiplock.enqueue("emails", {"to": "flaky@example.com", "flaky": True})
    skiplock.enqueue("emails", {"to": "x@invalid"})
    runs = drain("emails")
    assert [(r.payload["to"], r.attempt, r.status) for r in runs] == [
        ("ada@example.com", 1, "succeeded"),
        ("flaky@example.com", 1, "queued"),
        ("x@invalid", 1, "dead"),
        ("flaky@example.com", 2, "succeeded"),
    ]
    assert "cannot deliver to x@invalid" in runs[2].error
    assert sorted(tasks.SENT) == ["ada@example.com", "flaky@example.com"]
    assert enqueued_jobs() == []
    assert db.execute("SELECT status::text FROM jobs WHERE payload->>'to' = 'x@invalid'").fetchone()[0] == "dead"


def test_drain_inside_my_transaction(db):
    with psycopg.connect(db.info.dsn) as conn:  # a transaction, never committed
        skiplock.enqueue("emails", {"to": "tx@example.com"}, conn=conn)
        assert_enqueued("emails", {"to": "tx@example.com"}, conn=conn, count=1)
        assert enqueued_jobs("emails") == []  # not visible outside the transaction
        assert [r.status for r in drain("emails", conn=conn)] == ["succeeded"]
        conn.rollback()
