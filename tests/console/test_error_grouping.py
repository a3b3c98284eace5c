"""Dead-letter grouping (issue 36, defect 1): ids of every common shape are masked, so one bug makes
one group; the words that name the bug (key names, field names, exception classes) stay, so two
different bugs never merge."""

from __future__ import annotations

import re
from typing import Any

import pytest

from skiplock import enqueue_many
from skiplock.core.error_summary import group_key
from tests.support.helpers import scalar, wait_for

# (a message as real code raises it, the group it must land in)
TABLE = [
    ("ValueError: customer cus_18822 has no default payment method",
     "ValueError: customer cus_<n> has no default payment method"),
    ("ValueError: customer cus_NffrFeUfNV2Hib has no default payment method",
     "ValueError: customer cus_<id> has no default payment method"),
    ("stripe.error.InvalidRequestError: No such invoice: 'in_500123'",
     "stripe.error.InvalidRequestError: No such invoice: 'in_<n>'"),
    ("PermissionError: user42 may not edit project 7", "PermissionError: user<n> may not edit project <n>"),
    ("KeyError: 'email'", "KeyError: 'email'"),
    ("KeyError: 'phone'", "KeyError: 'phone'"),
    ("KeyError: 'sku-1017'", "KeyError: 'sku-<n>'"),
    ("AttributeError: 'NoneType' object has no attribute 'sha256'",
     "AttributeError: 'NoneType' object has no attribute 'sha256'"),
    ("UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff in position 12: invalid start byte",
     "UnicodeDecodeError: 'utf-8' codec can't decode byte <hex> in position <n>: invalid start byte"),
    ("ConnectionError: POST https://api.example.com/orders/1017?attempt=1: 503",
     "ConnectionError: POST https://api.example.com/orders/<n>?…: 503"),
    ("requests.exceptions.HTTPError: 404 Client Error: Not Found for url: https://api.github.com/repos/acme/w/issues/4411",
     "requests.exceptions.HTTPError: 404 Client Error: Not Found for url: https://api.github.com/repos/acme/w/issues/<n>"),
    # HTTP and SMTP status codes name the failure: kept, where their context says they are one
    ("HTTPError: 503 Service Unavailable", "HTTPError: 503 Service Unavailable"),
    ("urllib.error.HTTPError: HTTP Error 502: Bad Gateway", "urllib.error.HTTPError: HTTP Error 502: Bad Gateway"),
    ("RuntimeError: upstream returned status 429 for batch 88812",
     "RuntimeError: upstream returned status 429 for batch <n>"),
    ("ApiError: status_code=500 for invoice 4411", "ApiError: status_code=500 for invoice <n>"),
    ("smtplib.SMTPRecipientsRefused: {'bob@example.org': (550, b'User unknown')}",
     "smtplib.SMTPRecipientsRefused: {'<email>': (550, b'User unknown')}"),
    ("HTTPError: 503", "HTTPError: 503"),
    # other 3-digit numbers are ids
    ("ValueError: order 123 has no shipping address", "ValueError: order <n> has no shipping address"),
    ("ValueError: no such order: order 123", "ValueError: no such order: order <n>"),
    ("ValueError: invalid email bob.smith+x@example.org", "ValueError: invalid email <email>"),
    ("TimeoutError: order 5f0c6e1e-3b1f-4c43-9d1e-2f6f0a9c1d22 took 30.5s", "TimeoutError: order <uuid> took <n>s"),
    ("ValueError: token a94a8fe5ccb19ba61c4c0873d391e987982fbbd3 expired at 2026-11-25T23:42:37Z",
     "ValueError: token <hex> expired at <time>"),
    ("OSError: [Errno 111] Connection refused to 10.0.3.17:5432", "OSError: [Errno <n>] Connection refused to <ip>"),
    ('psycopg.errors.UniqueViolation: duplicate key value violates unique constraint "users_email_key"',
     'psycopg.errors.UniqueViolation: duplicate key value violates unique constraint "users_email_key"'),
    ("ValueError: name 'Bob Smith of Acme Corp' not allowed", "ValueError: name '<str>' not allowed"),
    ("ValueError: api key sk3kd9X0aaQ2mBz7 revoked", "ValueError: api key <id> revoked"),
]


@pytest.mark.parametrize(("message", "group"), TABLE)
def test_each_real_world_message_lands_in_its_group(message: str, group: str) -> None:
    assert group_key(message) == group


def test_status_codes_keep_two_failures_of_one_endpoint_apart() -> None:
    unavailable = {group_key(f"HTTPError: 503 Service Unavailable for url: https://api.example.com/orders/{n}")
                   for n in range(100, 140)}
    assert unavailable == {"HTTPError: 503 Service Unavailable for url: https://api.example.com/orders/<n>"}
    assert group_key("HTTPError: 404 Not Found") != group_key("HTTPError: 503 Service Unavailable")


def test_ids_of_the_same_bug_make_one_group_and_named_keys_stay_apart() -> None:
    customers = {group_key(f"ValueError: customer cus_{n} has no default payment method") for n in range(9000, 9095)}
    assert len(customers) == 1
    assert group_key("KeyError: 'email'") != group_key("KeyError: 'phone'")


def test_a_worker_makes_one_group_per_bug(admin: Any, conn: Any, spawn_worker: Any) -> None:
    jobs: list[dict[str, Any]] = [{"queue": "orders", "payload": {"kind": "customer", "order": 18000 + n * 37},
                                   "max_attempts": 1} for n in range(30)]
    jobs += [{"queue": "orders", "payload": {"kind": "missing", "order": 1, "field": field}, "max_attempts": 1}
             for field in ("email", "email", "phone", "phone", "phone")]
    enqueue_many(jobs)
    worker = spawn_worker(SKIPLOCK_TASKS="tests.support.failing_handlers", SKIPLOCK_QUEUES="orders")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'dead'") == len(jobs), timeout=60,
             message="the worker to kill every job")
    worker.terminate()
    stored = dict(conn.execute("SELECT error_group, count(*) FROM jobs WHERE status = 'dead' GROUP BY 1").fetchall())
    assert stored == {"ValueError: customer cus_<n> has no default payment method": 30,
                      "KeyError: 'email'": 2, "KeyError: 'phone'": 3}
    # the page lists the three groups with their counts, the biggest first
    html = admin.get("/dead/?queue=orders").get_data(as_text=True)
    counts = re.findall(r'<td class="err[^"]*"[^>]*><a [^>]*>(.*?)</a>.*?</td>\s*<td class="num"[^>]*>(\d+)</td>',
                        html, re.S)
    assert [(g.replace("&#39;", "'").replace("&lt;", "<").replace("&gt;", ">"), int(n)) for g, n in counts] == [
        ("ValueError: customer cus_<n> has no default payment method", 30), ("KeyError: 'phone'", 3),
        ("KeyError: 'email'", 2)]


def test_each_group_says_when_it_was_first_and_last_seen_and_its_trend(admin: Any, conn: Any,
                                                                       spawn_worker: Any) -> None:
    enqueue_many([{"queue": "orders", "payload": {"kind": "customer", "order": 18000 + n}, "max_attempts": 1}
                  for n in range(4)])
    worker = spawn_worker(SKIPLOCK_TASKS="tests.support.failing_handlers", SKIPLOCK_QUEUES="orders")
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'dead'") == 4, timeout=60,
             message="four dead jobs")
    worker.terminate()
    html = admin.get("/dead/?queue=orders").get_data(as_text=True)
    row = re.search(r'cus_&lt;n&gt; has no default payment method</a>.*?</tr>', html, re.S)
    assert row, html
    first, last = (conn.execute("SELECT min(finished_at), max(finished_at) FROM jobs WHERE status = 'dead'")
                   .fetchone())
    assert f'<td class="first-seen" data-label="first seen">{first:%Y-%m-%d %H:%M:%S}' in row.group(0)
    assert f'<td class="last-seen" data-label="last seen">{last:%Y-%m-%d %H:%M:%S}' in row.group(0)
    assert 'data-trend="new"' in row.group(0)  # all four in the last hour, none before
