"""A worker's own liveness endpoint (`--health-port` / SKIPLOCK_HEALTH_PORT) for orchestrators.

GET /healthz (or /health) answers 200 while the claim loop is turning and the database answers,
503 otherwise (also while shutting down, so a load balancer or kubelet stops counting on it).
GET /metrics serves this worker's own counters and latency histograms in Prometheus format.
A stdlib http.server in a daemon thread: nothing to install, and it cannot block the worker.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from psycopg_pool import ConnectionPool

from skiplock.core.plumbing.config import Settings
from skiplock.monitor.metrics import histogram_family, render
from skiplock.runtime.latency import LatencyRecorder
from skiplock.runtime.ledger import Counters

log = logging.getLogger("skiplock.health")

DB_PROBE_TIMEOUT = 2.0  # seconds to get a pooled connection for the probe


class Worker(Protocol):
    """What the endpoint reads of the worker it serves (the runner's Worker), and nothing more."""

    @property
    def worker_id(self) -> str: ...
    @property
    def settings(self) -> Settings: ...
    @property
    def pool(self) -> ConnectionPool | None: ...
    @property
    def loop_tick(self) -> float: ...  # time.monotonic() of the claim loop's last turn
    @property
    def stopping(self) -> bool: ...
    @property
    def counters(self) -> Counters: ...
    @property
    def latency(self) -> LatencyRecorder: ...
    def in_flight_ids(self) -> list[int]: ...


def loop_stall_limit(worker: Worker) -> float:
    """Seconds without a claim-loop turn after which the worker counts as stuck."""
    # the loop wakes at least every poll interval; allow for a slow claim on top
    return max(3 * worker.settings.poll_interval, 10.0)


def liveness(worker: Worker) -> tuple[bool, dict[str, Any]]:
    """(alive, details): claim loop turned recently, not stopping, and `SELECT 1` answers."""
    details: dict[str, Any] = {"worker_id": worker.worker_id}
    stalled_for = time.monotonic() - worker.loop_tick
    details["claim_loop_seconds_since_turn"] = round(stalled_for, 3)
    loop_ok = stalled_for <= loop_stall_limit(worker)
    stopping = worker.stopping
    db_ok = False
    if worker.pool is not None and not stopping:
        try:
            with worker.pool.connection(timeout=DB_PROBE_TIMEOUT) as conn:
                db_ok = conn.execute("SELECT 1").fetchone() is not None
        except Exception as exc:  # any failure to reach the database is "not alive"
            details["db_error"] = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    details.update({"claim_loop": loop_ok, "database": db_ok, "stopping": stopping,
                    "in_flight": len(worker.in_flight_ids())})
    return loop_ok and db_ok and not stopping, details


class WorkerCollector(Collector):
    """This process's counters and histograms (not the queue's: that is the web /metrics)."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker

    def collect(self) -> Iterator[Metric]:
        """Counters of this process, then its latency histograms."""
        c = self.worker.counters
        for name, value in (("claimed", c.claimed), ("succeeded", c.succeeded), ("retried", c.retried),
                            ("dead", c.dead), ("failed", c.failed), ("stale_acks", c.stale_acks),
                            ("claim_errors", c.claim_errors), ("ack_errors", c.ack_errors),
                            ("lost_leases", c.lost_leases)):
            family = CounterMetricFamily(f"skiplock_worker_{name}", f"Jobs/events {name} by this worker process")
            family.add_metric([], float(value))
            yield family
        inflight = GaugeMetricFamily("skiplock_worker_in_flight", "Jobs this worker is running")
        inflight.add_metric([], float(len(self.worker.in_flight_ids())))
        yield inflight
        for metric, hist in self.worker.latency.snapshot().items():
            yield histogram_family(metric, list(hist.bounds), hist.cumulative(), hist.sum)


class HealthServer:
    """Serves /healthz and /metrics for one worker on a daemon thread."""

    def __init__(self, worker: Worker, port: int, host: str = "0.0.0.0") -> None:
        self.worker = worker
        collector = WorkerCollector(worker)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?")[0] in ("/healthz", "/health", "/"):
                    alive, details = liveness(outer.worker)
                    body = json.dumps({"status": "ok" if alive else "unavailable", **details}).encode()
                    self._send(200 if alive else 503, "application/json", body)
                elif self.path.split("?")[0] == "/metrics":
                    self._send(200, "text/plain; version=0.0.4; charset=utf-8", render(collector))
                else:
                    self._send(404, "text/plain", b"not found\n")

            def _send(self, code: int, ctype: str, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("health %s", format % args)

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="skiplock-health", daemon=True)

    @property
    def port(self) -> int:
        """The bound port (useful when started on port 0)."""
        return int(self.server.server_address[1])

    def start(self) -> None:
        """Begin serving in the background."""
        self.thread.start()
        log.info("health endpoint on :%d (/healthz, /metrics)", self.port)

    def stop(self) -> None:
        """Stop serving and free the port."""
        self.server.shutdown()
        self.server.server_close()
