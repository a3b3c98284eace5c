"""A FastAPI app with async SQLAlchemy: orders enqueue their confirmation in their transaction,
and the skiplock console is mounted under /admin/jobs behind the app's own login.

Run: `uvicorn app:app` with DATABASE_URL set (after `skiplock migrate`).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse
from models import Order, Session, create_tables
from starlette.middleware.sessions import SessionMiddleware

from skiplock import enqueue_async
from skiplock.webapp.integrations.asgi import fastapi_console

SECRET = os.environ.get("APP_SECRET", "example-only-not-secret")
# The app's users (a real app has a table): name -> (password, may act in the console).
USERS = {"alice": ("alice-pw", True), "bob": ("bob-pw", False)}


async def form(request: Request) -> dict[str, str]:
    """The urlencoded form of a request (python-multipart is not needed for these small forms)."""
    return {k: v[0] for k, v in parse_qs((await request.body()).decode()).items()}


def current_user(request: Request) -> str:
    """The app's auth dependency: the logged-in user, or a redirect to the login page."""
    user = request.session.get("user")
    if user not in USERS:
        raise HTTPException(303, headers={"Location": f"/login?next={request.url.path}"})
    return str(user)


def console_role(user: str = Depends(current_user)) -> tuple[str, str]:
    """Who may do what in the job console: built on the app's own dependency."""
    return ("admin" if USERS[user][1] else "readonly"), user


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    await create_tables()  # an example's shortcut; a real app runs Alembic
    yield


app = FastAPI(lifespan=lifespan)
app.add_middleware(SessionMiddleware, secret_key=SECRET)
app.mount("/admin/jobs", fastapi_console(console_role, secret_key=SECRET, host=app))


@app.get("/login", response_class=HTMLResponse)
async def login_page(next: str = "/admin/jobs/") -> str:
    return ('<!doctype html><title>Log in</title><h1>Log in</h1><form method="post" action="/login">'
            '<input name="user" aria-label="user"><input name="password" type="password" aria-label="password">'
            f'<input type="hidden" name="next" value="{next if next.startswith("/") else "/"}">'
            '<button type="submit">Log in</button></form>')


@app.post("/login")
async def login(request: Request) -> Any:
    data = await form(request)
    user = data.get("user", "")
    if user not in USERS or USERS[user][0] != data.get("password"):
        return PlainTextResponse("wrong user or password", 401)
    request.session["user"] = user
    target = data.get("next", "/")
    return RedirectResponse(target if target.startswith("/") and not target.startswith("//") else "/", 303)


@app.post("/orders")
async def place_order(request: Request) -> Any:
    item = (await form(request)).get("item", "")
    try:
        async with Session.begin() as session:  # the order and its job commit together, or neither
            order = Order(item=item)
            session.add(order)
            await session.flush()  # the order's id
            await enqueue_async("order-emails", {"order_id": order.id}, conn=session)
            if not item:
                raise ValueError("an order needs an item")  # rolls back the order AND its job
    except ValueError as exc:
        return PlainTextResponse(str(exc), 400)
    return PlainTextResponse(str(order.id), 201)
