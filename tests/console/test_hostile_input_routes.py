"""Property: random and hostile path, query and form values on every console route never cause a 500.

Complements tests/console/test_security.py (a fixed hostile list) with hypothesis-generated text and
raw percent-encoded bytes that are not UTF-8, as admin and as the read-only user.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote_from_bytes

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.console.conftest import ADMIN, READONLY, login
from tests.console.test_security import SAFE, assert_safe, build, defaults, routes, view_params
from tests.support.factory import make_job

# raw bytes percent-encoded as-is: invalid UTF-8, NUL and control bytes reach the app undecoded
RAW = st.binary(max_size=40).map(lambda b: quote_from_bytes(b, safe=""))
TEXT = st.text(max_size=60) | st.sampled_from(["-1", "0", "99999999999999999999", "' OR 1=1 --", "<b>", "\x00"])


@pytest.mark.slow  # 8-25 s each (fuzzing, a second cluster, a subprocess suite): the full run, not the edit-test loop
@pytest.mark.parametrize("account", [ADMIN, READONLY], ids=["admin", "readonly"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_query_values_on_every_page_never_500(app: Any, conn: Any, account: tuple[str, str],
                                                     data: st.DataObject) -> None:
    if not conn.execute("SELECT count(*) FROM jobs").fetchone()[0]:
        make_job(conn, "t1", "dead", last_error="boom")
    client = app.test_client()
    login(client, *account)
    job = conn.execute("SELECT min(id) FROM jobs").fetchone()[0]
    pages = [r for r in routes(app) if r[3] & SAFE and r[1] != "auth.login"]
    rule, _endpoint, _args, _methods = data.draw(st.sampled_from(pages))
    params = data.draw(st.lists(st.sampled_from(view_params()), min_size=1, max_size=3, unique=True))
    encoded = "&".join(f"{p}={data.draw(RAW if data.draw(st.booleans()) else TEXT.map(quote))}" for p in params)
    url = build(rule, defaults(job))
    assert_safe(client.get(f"{url}?{encoded}"))


def quote(value: str) -> str:
    return quote_from_bytes(value.encode("utf-8", "surrogatepass"), safe="")


@pytest.mark.slow  # 8-25 s each (fuzzing, a second cluster, a subprocess suite): the full run, not the edit-test loop
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_form_values_on_every_action_never_500(app: Any, conn: Any, data: st.DataObject) -> None:
    if not conn.execute("SELECT count(*) FROM jobs").fetchone()[0]:
        make_job(conn, "t1", "dead", last_error="boom")
    client = app.test_client()
    login(client, *ADMIN)
    token = client.get("/").get_data(as_text=True).split('name="csrf_token" value="', 1)[1].split('"', 1)[0]
    job = conn.execute("SELECT min(id) FROM jobs").fetchone()[0]
    actions = [r for r in routes(app) if r[3] - SAFE and r[1] not in ("auth.login", "auth.logout")]
    rule, _endpoint, _args, _methods = data.draw(st.sampled_from(actions))
    params = data.draw(st.lists(st.sampled_from(view_params()), min_size=1, max_size=3, unique=True))
    body = "&".join(f"{p}={data.draw(RAW if data.draw(st.booleans()) else TEXT.map(quote))}" for p in params)
    body += f"&csrf_token={token}"
    assert_safe(client.post(build(rule, defaults(job)), data=body,
                            content_type="application/x-www-form-urlencoded"))


@pytest.mark.slow  # 8-25 s each (fuzzing, a second cluster, a subprocess suite): the full run, not the edit-test loop
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_path_values_on_every_route_never_500(app: Any, conn: Any, data: st.DataObject) -> None:
    """Every route that takes path arguments, with random and raw (non-UTF-8) bytes in each of them:
    GET for pages, POST with a valid CSRF token for actions, as admin."""
    if not conn.execute("SELECT count(*) FROM jobs").fetchone()[0]:
        make_job(conn, "t1", "dead", last_error="boom")
    client = app.test_client()
    login(client, *ADMIN)
    token = client.get("/").get_data(as_text=True).split('name="csrf_token" value="', 1)[1].split('"', 1)[0]
    with_args = [r for r in routes(app) if r[2] and r[1] not in ("auth.login", "auth.logout", "static")]
    rule, _endpoint, args, methods = data.draw(st.sampled_from(with_args))
    raw = {a: data.draw(RAW if data.draw(st.booleans()) else TEXT.map(quote)) for a in args}
    # already percent-encoded: put each value in its place without quoting it again
    url = rule
    for a in args:
        url = re_sub_arg(url, a, raw[a] or "%00")
    if methods & SAFE:
        assert_safe(client.get(url))
    else:
        assert_safe(client.post(url, data=f"csrf_token={token}", content_type="application/x-www-form-urlencoded"))


def re_sub_arg(rule: str, name: str, value: str) -> str:
    """`rule` with its <converter:name> replaced by `value` as it is (already percent-encoded)."""
    return re.sub(r"<(?:[a-z]+:)?" + name + ">", lambda _m: value, rule)
