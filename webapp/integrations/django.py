"""The console inside a Django project: one include() in urls.py, behind Django's own login.

    # urls.py
    from django.urls import path
    from skiplock.webapp.integrations.django import console_urls

    urlpatterns = [
        ...,
        path("admin/jobs/", console_urls()),      # staff may look; superusers may retry and purge
    ]

A link in Django's admin (index and sidebar), shown to whom the rule lets in:

    from django.contrib import admin
    from skiplock.webapp.integrations.django import add_admin_link

    add_admin_link(admin.site)

`console_urls(authorize=...)` takes the rule as a function of Django's request that returns
"admin", "readonly", (role, user name) or None. The default, `staff_rule()`, lets staff in
read-only and gives the admin role to superusers and to users with the permission you name.
A visitor who is not logged in is sent to settings.LOGIN_URL; a logged-in user the rule refuses
gets 403. The console keeps its own CSRF token (Django's CSRF middleware is bypassed for its
URLs only), its CSP, and writes the Django user name into the audit trail.

The console is a WSGI app; each request is handed to it with SCRIPT_NAME set to the prefix, so
every link, form and htmx poll carries it. Works under Django's WSGI and ASGI handlers.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import sys
import threading
from collections.abc import Callable, Iterable
from http.cookies import SimpleCookie
from typing import Any

from flask import Flask

from skiplock.core.errors import ConfigError
from skiplock.webapp.integrations.hosted import IDENTITY_KEY, answer_is_valid, hosted_console

# What a rule answers for a Django request: a role, (role, user name), or None to refuse.
DjangoRule = Callable[[Any], "str | tuple[str, str] | None"]
# The URL name of the console's root, for reverse("skiplock-console", kwargs={"subpath": ""}).
URL_NAME = "skiplock-console"
# WSGI keys a Django request may carry that must not reach the console: the body is replayed from
# request.body, and a server's file wrapper would hand back an object Django cannot send.
_DROPPED_KEYS = ("wsgi.input", "wsgi.file_wrapper", "CONTENT_LENGTH")


def staff_rule(admin_permission: str | None = None) -> DjangoRule:
    """Staff may look; superusers, and staff holding `admin_permission` ("app.codename"), may act."""

    def rule(request: Any) -> tuple[str, str] | None:
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated or not user.is_active or not user.is_staff:
            return None
        may_act = user.is_superuser or (admin_permission is not None and user.has_perm(admin_permission))
        return ("admin" if may_act else "readonly"), user.get_username()

    return rule


def console_urls(authorize: DjangoRule | None = None, *, database_url: str | None = None,
                 config: dict[str, Any] | None = None) -> Any:
    """What `path("admin/jobs/", console_urls())` includes: every URL under the prefix is the console.

    The database is `database_url`, else settings.SKIPLOCK_DATABASE_URL, else DATABASE_URL from the
    environment. The session key derives from settings.SECRET_KEY.
    """
    from django.urls import include, re_path

    rule = authorize or staff_rule()
    if not callable(rule):
        raise ConfigError("console_urls: authorize= must be a callable that takes Django's request and returns "
                          "'admin', 'readonly', (role, user name) or None")
    view = ConsoleView(rule, database_url=database_url, config=config)
    return include([re_path(r"^(?P<subpath>.*)\Z", view, name=URL_NAME)])


class ConsoleView:
    """The Django view that forwards every request under the prefix to the console's WSGI app."""

    # The console carries its own CSRF token in every form; Django's check would refuse them.
    csrf_exempt = True

    def __init__(self, rule: DjangoRule, *, database_url: str | None, config: dict[str, Any] | None) -> None:
        self.rule = rule
        self.database_url = database_url
        self.config = config
        self._console: Flask | None = None
        self._lock = threading.Lock()

    def console(self) -> Flask:
        """The console app, built at the first request: Django's settings are ready by then."""
        with self._lock:
            if self._console is None:
                from django.conf import settings

                url = self.database_url or getattr(settings, "SKIPLOCK_DATABASE_URL", None)
                # a key of its own, derived from the project's: every process agrees, and the
                # console's cookie cannot be replayed as a Django one or the reverse
                key = hmac.new(str(settings.SECRET_KEY).encode(), b"skiplock-console", hashlib.sha256).hexdigest()
                self._console = hosted_console(database_url=url, secret_key=key, config=self.config)
            return self._console

    def __call__(self, request: Any, subpath: str) -> Any:
        from django.contrib.auth.views import redirect_to_login
        from django.http import HttpResponseForbidden

        answer = self.rule(request)
        if not answer_is_valid(answer):
            raise ConfigError(f"the console's authorize rule returned {answer!r}; expected 'admin', 'readonly', "
                              "(role, user name) or None")
        if answer is None:
            user = getattr(request, "user", None)
            if user is None or not user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            return HttpResponseForbidden("Forbidden: your login may not see the job console.\n",
                                         content_type="text/plain")
        environ = _environ(request, subpath)
        environ[IDENTITY_KEY] = answer
        return _call_wsgi(self.console(), environ)


def _wsgi_str(text: str) -> str:
    # WSGI strings are bytes read as latin-1 (PEP 3333); Django hands us decoded text
    return text.encode("utf-8").decode("latin-1")


def _environ(request: Any, subpath: str) -> dict[str, Any]:
    """A WSGI environ for the console, from Django's request: prefix in SCRIPT_NAME, the rest in PATH_INFO."""
    body = request.body  # read (and cached) by Django even when a middleware parsed the form first
    environ = {k: v for k, v in request.META.items() if k not in _DROPPED_KEYS}
    prefix = request.path_info[: len(request.path_info) - len(subpath)].rstrip("/")
    environ.update({
        "SCRIPT_NAME": _wsgi_str(request.META.get("SCRIPT_NAME", "") + prefix),
        "PATH_INFO": _wsgi_str("/" + subpath),
        "wsgi.input": io.BytesIO(body),
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.url_scheme": request.scheme,
        "wsgi.errors": request.META.get("wsgi.errors", sys.stderr),
        "wsgi.version": (1, 0),
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    })
    environ.setdefault("SERVER_NAME", request.get_host().rsplit(":", 1)[0])
    environ.setdefault("SERVER_PORT", request.get_port())
    environ.setdefault("SERVER_PROTOCOL", "HTTP/1.1")
    return environ


def _call_wsgi(app: Flask, environ: dict[str, Any]) -> Any:
    """Run the WSGI app and turn its answer into a Django HttpResponse (cookies kept apart)."""
    from django.http import HttpResponse

    started: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], None]:
        started["status"], started["headers"] = status, headers
        return lambda data: None  # the write() callable: Flask never uses it

    result: Iterable[bytes] = app(environ, start_response)
    try:
        body = b"".join(result)  # console pages are small; static files are a few hundred kB at most
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
    code, _, reason = started["status"].partition(" ")
    response = HttpResponse(body, status=int(code), reason=reason or None)
    for name, value in started["headers"]:
        if name.lower() == "set-cookie":
            # Django holds one value per header name: cookies go through response.cookies
            jar: SimpleCookie = SimpleCookie()
            jar.load(value)
            response.cookies.update(jar)
        else:
            response.headers[name] = value
    return response


def add_admin_link(site: Any, authorize: DjangoRule | None = None, label: str = "Job queue") -> None:
    """List the console in Django admin's index and sidebar, as a "Skiplock" app with one entry.

    Shown only to users `authorize` (default: staff_rule()) would let into the console. The
    admin has no hook for a plain link, so this wraps `site.get_app_list` and appends an entry
    shaped like a model's, whose URL is the console (reversed by its URL name).
    """
    from django.urls import NoReverseMatch, reverse

    rule = authorize or staff_rule()
    original = site.get_app_list

    def get_app_list(request: Any, app_label: str | None = None) -> list[dict[str, Any]]:
        apps = original(request) if app_label is None else original(request, app_label)
        if app_label is not None or rule(request) is None:
            return apps
        try:
            url = reverse(URL_NAME, kwargs={"subpath": ""})
        except NoReverseMatch:
            return apps  # console_urls() is not in this project's urls.py: nothing to link to
        entry = {"name": label, "object_name": "SkiplockConsole", "admin_url": url, "add_url": None,
                 "view_only": True, "perms": {"add": False, "change": False, "delete": False, "view": True}}
        return [*apps, {"name": "Skiplock", "app_label": "skiplock", "app_url": url, "has_module_perms": True,
                        "models": [entry]}]

    site.get_app_list = get_app_list
