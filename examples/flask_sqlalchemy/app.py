"""A Flask app with Flask-SQLAlchemy and Flask-Login: orders enqueue their confirmation in their
transaction, and the skiplock console is mounted under /admin/jobs behind the app's own login.

Run: `gunicorn 'app:create_app()'` with DATABASE_URL set (after `skiplock migrate`).
"""

from __future__ import annotations

import os

from flask import Flask, Request, redirect, request
from flask.typing import ResponseReturnValue
from flask_login import LoginManager, UserMixin, current_user, login_user
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import Boolean, String
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from skiplock import enqueue
from skiplock.webapp import mount


class Base(DeclarativeBase):
    pass


db = SQLAlchemy(model_class=Base)
login_manager = LoginManager()


class Order(db.Model):  # type: ignore[name-defined]
    __tablename__ = "orders"

    id: Mapped[int] = mapped_column(primary_key=True)
    item: Mapped[str] = mapped_column(String(100))
    confirmed: Mapped[bool] = mapped_column(Boolean, default=False)  # set by the worker's handler


class User(UserMixin):
    """The app's users (a real app has a table); `is_admin` may retry and purge in the console."""

    PASSWORDS = {"alice": "alice-pw", "bob": "bob-pw"}
    ADMINS = {"alice"}

    def __init__(self, name: str) -> None:
        self.id = name
        self.is_admin = name in self.ADMINS


@login_manager.user_loader
def load_user(name: str) -> User | None:
    return User(name) if name in User.PASSWORDS else None


def who_may_see_jobs(req: Request) -> tuple[str, str] | None:
    """The console's rule, run in this app's request context, so Flask-Login's current_user answers."""
    if not current_user.is_authenticated:
        return None  # the console answers 403
    return ("admin" if current_user.is_admin else "readonly"), current_user.id


def create_app() -> Flask:
    app = Flask(__name__)
    app.secret_key = os.environ.get("APP_SECRET", "example-only-not-secret")
    # psycopg 3 under SQLAlchemy, the driver skiplock itself uses
    app.config["SQLALCHEMY_DATABASE_URI"] = "postgresql+psycopg://" + os.environ["DATABASE_URL"].split("://", 1)[1]
    db.init_app(app)
    login_manager.init_app(app)
    with app.app_context():
        db.create_all()  # an example's shortcut; a real app runs Alembic
    app.add_url_rule("/login", view_func=login, methods=["GET", "POST"])
    app.add_url_rule("/orders", view_func=place_order, methods=["POST"])
    mount(app, "/admin/jobs", authorize=who_may_see_jobs)
    return app


def login() -> ResponseReturnValue:
    if request.method == "GET":
        return ('<!doctype html><title>Log in</title><h1>Log in</h1><form method="post" action="/login">'
                '<input name="user" aria-label="user"><input name="password" type="password" aria-label="password">'
                '<button type="submit">Log in</button></form>')
    name = request.form.get("user", "")
    if User.PASSWORDS.get(name) != request.form.get("password"):
        return "wrong user or password", 401
    login_user(User(name))
    return redirect("/admin/jobs/", 303)


def place_order() -> ResponseReturnValue:
    item = request.form.get("item", "")
    order = Order(item=item)
    db.session.add(order)
    db.session.flush()  # the order's id
    enqueue("order-emails", {"order_id": order.id}, conn=db.session)  # in the session's transaction
    if not item:
        db.session.rollback()  # the order AND its job are gone
        return "an order needs an item", 400
    db.session.commit()  # the order and its job commit together
    return str(order.id), 201
