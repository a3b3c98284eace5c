"""The console's view of durable jobs that a real worker parked: the job page (steps, cursors, what it is
parked on, "Why isn't it running"), the Parked view per queue and per key, the overview's parked count,
the search by signal key, and the two actions, "wake now" and "send signal", which say what they will do
on which database before they do it, call the core, and are audited.
"""

from __future__ import annotations

import html
import re
from typing import Any

from skiplock import enqueue
from tests.support.helpers import scalar, wait_for

QUEUE = "c_durable"
WORKER = {"SKIPLOCK_TASKS": "tests.support.console_durable_handlers", "SKIPLOCK_QUEUES": QUEUE}


def _parked(conn: Any, n: int) -> None:
    wait_for(lambda: scalar(conn, "SELECT count(*) FROM job_waits") == n, timeout=60, message=f"{n} parked jobs")


def _effects(conn: Any, job: int, what: str) -> int:
    return int(scalar(conn, "SELECT count(*) FROM test_effects WHERE job_id = %s AND payload ? %s", (job, what)))


def _jobs(conn: Any) -> dict[str, int]:
    """Four jobs parked by a real worker: a sleeper with 3 steps and a cursor, two waiters on one key (with
    and without a timeout) and one on another key. The worker is left running."""
    ids = {"sleeper": enqueue(QUEUE, {"steps": 3, "cursor": 41, "sleep": 3600}),
           "waiter": enqueue(QUEUE, {"steps": 2, "wait": "order-1:paid", "timeout": 86400}),
           "forever": enqueue(QUEUE, {"wait": "order-1:paid"}),
           "other": enqueue(QUEUE, {"wait": "order-2:paid"})}
    _parked(conn, 4)
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'parked'") == 4
    return ids


def test_what_a_worker_parked_shows_on_every_page(admin: Any, conn: Any, spawn_worker: Any) -> None:
    spawn_worker(**WORKER)
    ids = _jobs(conn)

    # the sleeper's page: its three steps with their result sizes, its cursor, what it sleeps until
    page = admin.get(f"/jobs/{ids['sleeper']}").get_data(as_text=True)
    steps = re.findall(r'<tr data-step="(step-\d)">.*?data-size="(\d+)"', page, re.S)
    sizes = {name: int(size) for name, size in steps}
    assert list(sizes) == ["step-0", "step-1", "step-2"], page
    assert sizes["step-0"] < sizes["step-1"] < sizes["step-2"]  # 100, 200 and 300 characters of padding
    assert re.search(r'<tr data-cursor="row">.*?<code>41</code>', page, re.S)
    assert 'data-parked="sleep"' in page and "Sleeping (<code>nap</code>)" in page and "Wake now" in page
    assert 'data-reason="parked"' in page and "no attempt" in page
    assert "It is sleeping ('nap') until" in html.unescape(page)
    assert f"/jobs/{ids['sleeper']}/wake\"" not in page  # only the confirmed "wake now" below

    # a waiter with a timeout, and one without (parked until 9999-12-31: shown as no timeout)
    page = admin.get(f"/jobs/{ids['waiter']}").get_data(as_text=True)
    assert 'data-parked="key"' in page and '<code class="signal-key">order-1:paid</code>' in page
    assert "WaitTimeout" in page and "Send signal" in page
    page = html.unescape(admin.get(f"/jobs/{ids['forever']}").get_data(as_text=True))
    assert "with no timeout" in page and "waiting for the signal 'order-1:paid'" in page
    assert "data-step=" not in page  # no step stored: no table

    # the Parked view: per queue and per key, with counts and the oldest
    page = admin.get("/parked/").get_data(as_text=True)
    assert re.search(r'data-sum="parked">4<', page) and re.search(r'data-sum="waiting">3<', page)
    row = re.search(rf'<tr data-queue="{QUEUE}">(.*?)</tr>', page, re.S)
    assert row, page
    counts = dict(re.findall(r'data-count="(\w+)">(\d+)<', row.group(1)))
    assert counts == {"parked": "4", "sleeping": "1", "waiting": "3"}
    oldest = scalar(conn, "SELECT job_id FROM job_waits ORDER BY parked_at, job_id LIMIT 1")
    assert f'data-oldest-job="{oldest}"' in row.group(1)
    key = re.search(r'<tr data-key="order-1:paid">(.*?)</tr>', page, re.S)
    assert key and 'data-count="waiting">2<' in key.group(1)
    oldest = scalar(conn, "SELECT job_id FROM job_waits WHERE key = 'order-1:paid' ORDER BY parked_at, job_id LIMIT 1")
    assert oldest in (ids["waiter"], ids["forever"])
    assert f'data-oldest-job="{oldest}"' in key.group(1) and "not sent" in key.group(1)
    assert re.search(r'<tr data-key="order-2:paid">.*?data-count="waiting">1<', page, re.S)
    one = admin.get("/parked/?key=order-2:paid").get_data(as_text=True)
    assert 'data-key="order-2:paid"' in one and 'data-key="order-1:paid"' not in one

    # the overview counts parked jobs apart: none of them is ready or scheduled
    page = admin.get("/").get_data(as_text=True)
    assert re.search(r'data-sum="parked"><a [^>]*>4</a>', page), page
    assert re.search(r'data-sum="ready">0<', page) and re.search(r'data-sum="scheduled">0<', page)
    row = re.search(rf'<tr class="" data-queue="{QUEUE}">(.*?)</tr>', page, re.S)
    assert row and re.search(r'data-count="parked">4<', row.group(1))

    # a signal key is searchable: the jobs waiting for it, and only those
    page = admin.get("/search/?signal_key=order-1:paid").get_data(as_text=True)
    found = {int(i) for i in re.findall(r'<tr data-job-id="(\d+)"', page)}
    assert found == {ids["waiter"], ids["forever"]}, page


def test_wake_now_and_send_signal_confirm_first_then_go_through_the_core(admin: Any, conn: Any,
                                                                         spawn_worker: Any) -> None:
    spawn_worker(**WORKER)
    ids = _jobs(conn)
    sleeper, waiter = ids["sleeper"], ids["waiter"]
    database = scalar(conn, "SELECT current_database()")

    # wake now: first a page that says what happens, on which database, to how many jobs; nothing changes
    page = admin.post(f"/jobs/{sleeper}/wake-now", data={}).get_data(as_text=True)
    assert 'data-confirm="wake"' in page and f"On database <strong data-database>{database}</strong>" in page \
        and f"1 job, job {sleeper}" in page
    assert "from parked to ready now" in page and "skips its finished steps" in page
    assert _effects(conn, sleeper, "run") == 1
    assert scalar(conn, "SELECT status::text FROM jobs WHERE id = %s", (sleeper,)) == "parked"
    # confirmed: the core wakes it, the worker runs its handler again (from the top, its steps skipped), and
    # the sleep, whose time has not come, parks it again
    done = admin.post(f"/jobs/{sleeper}/wake-now", data={"confirm": "yes"})
    assert done.status_code == 303
    wait_for(lambda: _effects(conn, sleeper, "run") == 2, timeout=30, message="the woken job's second run")
    _parked(conn, 4)
    assert _effects(conn, sleeper, "step") == 3  # each step ran once, in the first run
    assert scalar(conn, "SELECT attempts FROM jobs WHERE id = %s", (sleeper,)) == 0  # parking gave it back

    # send signal: the confirmation counts the jobs it wakes, and says the first signal of a key wins
    form = {"key": "order-1:paid", "payload": '{"amount": 42}'}
    page = html.unescape(admin.post(f"/jobs/{waiter}/send-signal", data=form).get_data(as_text=True))
    assert 'data-confirm="signal"' in page and f"<strong data-database>{database}</strong>" in page \
        and "The signal 'order-1:paid'" in page
    assert "wakes 2 parked job(s)" in page and "Yes, send it and wake 2 job(s)" in page
    assert scalar(conn, "SELECT count(*) FROM job_signals") == 0
    bad = admin.post(f"/jobs/{waiter}/send-signal", data={**form, "payload": "{not json"}, follow_redirects=True)
    assert "The payload is not JSON" in html.unescape(bad.get_data(as_text=True))
    assert scalar(conn, "SELECT count(*) FROM job_signals") == 0
    done = admin.post(f"/jobs/{waiter}/send-signal", data={**form, "confirm": "yes"}, follow_redirects=True)
    assert "Signal 'order-1:paid' sent: 2 parked job(s) woken." in html.unescape(done.get_data(as_text=True))
    woken = (waiter, ids["forever"])
    wait_for(lambda: all(_effects(conn, job, "got") == 1 for job in woken), timeout=30, message="both to get it")
    got = scalar(conn, "SELECT payload->'got' FROM test_effects WHERE job_id = %s AND payload ? 'got'", (waiter,))
    assert got == {"amount": 42}
    assert scalar(conn, "SELECT count(*) FROM job_waits") == 2  # the sleeper and order-2's waiter

    # again: the key's signal is kept, so the page says it was sent and offers nothing
    page = admin.post(f"/jobs/{ids['other']}/send-signal", data=form).get_data(as_text=True)
    assert "was already sent" in page and "disabled" in page

    # both actions are in the audit trail, with their counts and the signal's key
    rows = conn.execute("SELECT action, count, detail FROM audit_log ORDER BY id").fetchall()
    assert [(a, c) for a, c, _ in rows] == [("wake parked job", 1), ("send signal", 2)]
    assert rows[1][2]["key"] == "order-1:paid" and rows[1][2]["ids"] == [waiter]


def test_a_read_only_login_cannot_wake_or_signal(viewer: Any, conn: Any, spawn_worker: Any) -> None:
    spawn_worker(**WORKER)
    ids = _jobs(conn)
    for action in ("wake-now", "send-signal"):
        response = viewer.post(f"/jobs/{ids['waiter']}/{action}", data={"confirm": "yes", "key": "order-1:paid"})
        assert response.status_code == 403
    assert scalar(conn, "SELECT count(*) FROM job_signals") == 0 and scalar(conn, "SELECT count(*) FROM job_waits") == 4
