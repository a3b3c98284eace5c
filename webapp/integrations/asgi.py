"""The console inside a Starlette or FastAPI app: `app.mount(...)`, behind the app's own auth.

Starlette (the rule is a function of Starlette's Request, sync or async):

    from skiplock.webapp.integrations.asgi import console_app

    def who_may_see_jobs(request):
        user = request.session.get("user")
        return None if user is None else ("admin" if user in ADMINS else "readonly", user)

    app.mount("/admin/jobs", console_app(who_may_see_jobs, secret_key=SECRET))

FastAPI (the rule is a dependency, so it can itself depend on the app's auth dependency):

    from skiplock.webapp.integrations.asgi import fastapi_console

    def console_role(user: User = Depends(current_user)):   # current_user raises 401 when logged out
        return ("admin" if user.is_admin else "readonly", user.name)

    app.mount("/admin/jobs", fastapi_console(console_role, secret_key=SECRET))

A rule answers "admin", "readonly", (role, user name), or None (403); it may instead return a
Starlette Response (e.g. a redirect to the login page), which is sent as it is. The console
runs in a2wsgi's thread pool; its CSRF token, CSP, read-only role and audit trail (with the
user name the rule gave) work as in the standalone console.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

from psycopg_pool import ConnectionPool

from skiplock.core.errors import ConfigError
from skiplock.webapp.integrations.hosted import IDENTITY_KEY, answer_is_valid, hosted_console

# The ASGI types as Starlette spells them, so the apps made here mount there without a cast.
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
# Every method the console answers (FastAPI routes need the list).
METHODS = ["GET", "HEAD", "POST", "OPTIONS"]


def _wsgi_console(database_url: str | None, pool: ConnectionPool | None, secret_key: str | None,
                  config: Mapping[str, Any] | None, threads: int) -> ASGIApp:
    from a2wsgi import WSGIMiddleware

    console = hosted_console(database_url=database_url, pool=pool, secret_key=secret_key, config=config)
    adapter = WSGIMiddleware(console, workers=threads)  # type: ignore[arg-type]
    adapter.console = console  # type: ignore[attr-defined]  # tests and close_app() reach it here
    return adapter  # type: ignore[return-value]


def _check_answer(answer: Any) -> None:
    if not answer_is_valid(answer):
        raise ConfigError(f"the console's authorize rule returned {answer!r}; expected 'admin', 'readonly', "
                          "(role, user name), None or a Response")


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive() that hands the already-read body to the console, then the client's own messages."""
    sent = False

    async def replay() -> MutableMapping[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _forward(console: ASGIApp, scope: Scope, receive: Receive, send: Send, answer: Any, body: bytes) -> None:
    # a2wsgi copies scope into environ["asgi.scope"]; the console's hook reads it from there
    await console({**scope, IDENTITY_KEY: answer}, _replay(body, receive), send)


def console_app(authorize: Callable[[Any], Any], *, database_url: str | None = None,
                pool: ConnectionPool | None = None, secret_key: str | None = None,
                config: Mapping[str, Any] | None = None, threads: int = 8) -> ASGIApp:
    """An ASGI app to `mount()` in Starlette or FastAPI: `authorize(request)` decides each request.

    The database is `pool` (a psycopg_pool.ConnectionPool), else `database_url`, else DATABASE_URL.
    Pass `secret_key` (the app's own secret is fine): without it, one is derived from the database
    URL, which every process agrees on but which is not a secret.
    """
    if not callable(authorize):
        raise ConfigError("console_app: authorize= must be a callable that takes the request")
    console = _wsgi_console(database_url, pool, secret_key, config, threads)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        from starlette.requests import Request
        from starlette.responses import Response

        if scope["type"] != "http":
            await console(scope, receive, send)  # lifespan and websockets: a2wsgi answers them
            return
        request = Request(scope, receive)
        answer = authorize(request)
        if inspect.isawaitable(answer):
            answer = await answer
        if isinstance(answer, Response):
            await answer(scope, receive, send)
            return
        _check_answer(answer)
        body = await request.body()  # the rule may have read the form already: Starlette caches it
        await _forward(console, scope, receive, send, answer, body)

    app.console = console.console  # type: ignore[attr-defined]
    return app


def fastapi_console(authorize: Callable[..., Any], *, database_url: str | None = None,
                    pool: ConnectionPool | None = None, secret_key: str | None = None,
                    config: Mapping[str, Any] | None = None, threads: int = 8, host: Any = None) -> Any:
    """A FastAPI sub-app to `app.mount()`: `authorize` is a dependency, resolved by FastAPI as in a route.

    So it can take `Depends(current_user)`, cookies, headers, the app's session; an HTTPException
    it raises (401, or a 303 to the login page) is the answer. It returns what console_app's rule does.
    With `host=app`, the sub-app shares the host's `dependency_overrides`, so a test that overrides
    the app's auth dependency overrides it for the console too.
    """
    from fastapi import Depends, FastAPI, Request
    from starlette.responses import Response

    console = _wsgi_console(database_url, pool, secret_key, config, threads)
    sub = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    if host is not None:
        # FastAPI looks overrides up on the app that routes the request (this sub-app): share the
        # host's dict itself, so overrides set later (in a test) apply here as well
        sub.dependency_overrides = host.dependency_overrides

    class _Forwarded(Response):
        """The console's answer, streamed by a2wsgi straight to the client."""

        def __init__(self, request: Request, answer: Any, body: bytes) -> None:
            super().__init__()
            self.request, self.answer, self.body_bytes = request, answer, body

        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            await _forward(console, dict(self.request.scope), receive, send, self.answer, self.body_bytes)

    async def forward(request: Request, answer: Any = Depends(authorize)) -> Response:  # noqa: B008 (FastAPI's way)
        if isinstance(answer, Response):
            return answer
        _check_answer(answer)
        return _Forwarded(request, answer, await request.body())

    # this module's annotations are strings (PEP 563), and Request is imported here, not at module
    # level: give FastAPI the real classes, or it would read `request` as a query parameter
    forward.__annotations__ = {"request": Request, "answer": Any, "return": Response}
    sub.add_api_route("/{subpath:path}", forward, methods=METHODS, include_in_schema=False)
    sub.state.console = console.console  # type: ignore[attr-defined]
    return sub
