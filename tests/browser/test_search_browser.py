"""Search in Chromium against gunicorn: from the nav, the form's search becomes the URL (htmx pushes it),
a bad value is explained in place, and the back button brings the earlier search back."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from skiplock import enqueue
from tests.browser.conftest import log_in
from tests.browser.test_accessibility import _violations

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _listed(page: Any) -> set[int]:
    return {int(i) for i in page.locator("#search-results tr[data-job-id]").evaluate_all(
        "rows => rows.map(r => r.dataset.jobId)")}


def _query(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


def _wait_for_search(page: Any, **expected: str) -> None:
    """Wait until the address bar holds the search page with exactly these filters."""
    page.wait_for_url(lambda url: urlsplit(url).path == "/search/" and _query(url) == expected)


def test_search_from_the_form_keeps_the_url_and_back_restores_it(page: Any, console: Any, db_url: str) -> None:
    c42 = enqueue("emails", {"customer": {"id": 42}}, tenant="acme")
    c7 = enqueue("emails", {"customer": {"id": 7}}, tenant="acme")
    other = enqueue("billing", {"customer": {"id": 42}}, tenant="globex")
    log_in(page, console)
    page.click("nav >> text=Search")
    page.wait_for_selector("h1:has-text('Search jobs')")

    page.fill("input[name=path]", "customer.id")
    page.fill("input[name=value]", "42")
    page.click("form.search button[type=submit]")
    _wait_for_search(page, path="customer.id", value="42")
    page.wait_for_selector(f"#search-results tr[data-job-id='{c42}']")
    assert _listed(page) == {c42, other}
    assert _violations(page) == []

    page.fill("input[name=path]", "")
    page.fill("input[name=value]", "")
    page.fill("input[name=tenant]", "acme")
    page.click("form.search button[type=submit]")
    _wait_for_search(page, tenant="acme")
    page.wait_for_selector(f"#search-results tr[data-job-id='{c7}']")
    assert _listed(page) == {c42, c7}

    # a bad value: the message in place of the results, and the URL still says what was typed
    page.fill("input[name=path]", "customer.id")
    page.fill("input[name=value]", '{"id": ')
    page.click("form.search button[type=submit]")
    page.wait_for_selector("#search-results [role=alert]:has-text('is not valid JSON')")
    _wait_for_search(page, tenant="acme", path="customer.id", value='{"id": ')
    assert _listed(page) == set()
    assert _violations(page) == []  # axe-core: the form and its message (WCAG AA, as on every page)

    # back: the tenant search again, its field filled in from the URL; back again: the payload search
    page.go_back()
    _wait_for_search(page, tenant="acme")
    page.wait_for_selector(f"#search-results tr[data-job-id='{c7}']")
    assert _listed(page) == {c42, c7}
    assert page.input_value("input[name=tenant]") == "acme"
    assert page.input_value("input[name=path]") == ""
    page.go_back()
    _wait_for_search(page, path="customer.id", value="42")
    page.wait_for_selector(f"#search-results tr[data-job-id='{other}']")
    assert _listed(page) == {c42, other}
    assert page.input_value("input[name=value]") == "42"
    # forward, and a reload of the shared URL, give the same search
    page.go_forward()
    _wait_for_search(page, tenant="acme")
    page.reload()
    page.wait_for_selector(f"#search-results tr[data-job-id='{c7}']")
    assert _listed(page) == {c42, c7}
