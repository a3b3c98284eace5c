"""A Flask app with Flask-SQLAlchemy enqueues through `db.session`, as its views are written (issue 35, defect 1).

`enqueue(..., conn=db.session)` used to raise TypeError (a scoped_session was not accepted) and the
view answered 500. The job now joins the view's transaction: a rollback leaves no order and no job, a
commit leaves one of each.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.integration.test_user_transaction import sqlalchemy_url
from tests.support.helpers import scalar


@pytest.fixture
def shop(db_url: str) -> Iterator[Any]:
    from flask import Flask, abort, request
    from flask_sqlalchemy import SQLAlchemy

    from skiplock import enqueue, enqueue_many

    app = Flask(__name__)
    app.config["SQLALCHEMY_DATABASE_URI"] = sqlalchemy_url(db_url, "psycopg")
    db = SQLAlchemy(app)

    class Order(db.Model):  # type: ignore[name-defined]
        __tablename__ = "fsa_orders"
        id = db.Column(db.Integer, primary_key=True)
        item = db.Column(db.String, nullable=False)

    @app.post("/orders")
    def place_order() -> Any:
        order = Order(item=request.form["item"])
        db.session.add(order)
        db.session.flush()
        enqueue("fsa_receipts", {"order_id": order.id}, conn=db.session)
        enqueue_many([("fsa_stock", {"order_id": order.id})], conn=db.session)
        if request.form.get("fail"):
            db.session.rollback()
            abort(409)
        db.session.commit()
        return {"order": order.id}, 201

    with app.app_context():
        db.create_all()
    yield app.test_client()
    with app.app_context():
        db.drop_all()
        db.engine.dispose()


def _count(conn: psycopg.Connection, sql: str) -> int:
    return int(scalar(conn, sql))


def test_rollback_in_the_view_leaves_no_job(shop: Any, conn: psycopg.Connection) -> None:
    answer = shop.post("/orders", data={"item": "tea", "fail": "1"})
    assert answer.status_code == 409
    assert _count(conn, "SELECT count(*) FROM fsa_orders") == 0
    assert _count(conn, "SELECT count(*) FROM jobs WHERE queue LIKE 'fsa_%'") == 0


def test_commit_in_the_view_leaves_exactly_one_job_per_enqueue(shop: Any, conn: psycopg.Connection) -> None:
    answer = shop.post("/orders", data={"item": "tea"})
    assert answer.status_code == 201, answer.get_data(as_text=True)
    order_id = answer.get_json()["order"]
    assert _count(conn, "SELECT count(*) FROM fsa_orders") == 1
    rows = conn.execute("SELECT queue, payload FROM jobs WHERE queue LIKE 'fsa_%' ORDER BY queue").fetchall()
    assert rows == [("fsa_receipts", {"order_id": order_id}), ("fsa_stock", {"order_id": order_id})]
