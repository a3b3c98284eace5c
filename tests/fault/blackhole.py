"""A TCP proxy on loopback that can black-hole its connections, for the silent-network scenario.

`freeze(hold_new_for)` stops forwarding on every open connection: the sockets stay open and no RST
is sent, so each peer's kernel keeps answering TCP (keepalives included) while no byte ever passes,
exactly like a NAT entry or a load balancer that dropped the flow. Connections accepted during the
next `hold_new_for` seconds are black-holed too; after that, new connections go through again.
Frozen connections stay frozen until `close()`.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time


class BlackholeProxy:
    """Forward 127.0.0.1:<port> to (host, port) until told to go silent."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self._lock = threading.Lock()
        self._pipes: list[tuple[socket.socket, socket.socket, threading.Event]] = []
        self._frozen_until = 0.0  # new connections accepted before this moment are black-holed
        self._closed = threading.Event()
        threading.Thread(target=self._accept, name="blackhole-accept", daemon=True).start()

    def freeze(self, hold_new_for: float) -> None:
        """Black-hole every open connection, and new ones for `hold_new_for` seconds."""
        with self._lock:
            self._frozen_until = time.monotonic() + hold_new_for
            for _, _, frozen in self._pipes:
                frozen.set()

    def close(self) -> None:
        self._closed.set()
        self.listener.close()
        with self._lock:
            for a, b, _ in self._pipes:
                for s in (a, b):
                    with contextlib.suppress(OSError):
                        s.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            frozen = threading.Event()
            with self._lock:
                if time.monotonic() < self._frozen_until:
                    frozen.set()
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pipes.append((client, server, frozen))
            threading.Thread(target=self._pump, args=(client, server, frozen), daemon=True).start()

    def _pump(self, client: socket.socket, server: socket.socket, frozen: threading.Event) -> None:
        peers = {client: server, server: client}
        while not self._closed.is_set():
            if frozen.is_set():
                # read nothing, send nothing, close nothing: a silent network
                self._closed.wait(0.5)
                continue
            try:
                ready, _, _ = select.select(list(peers), [], [], 0.2)
                for sock in ready:
                    data = sock.recv(65536)
                    if not data:
                        raise OSError("peer closed")
                    if frozen.is_set():
                        break  # the freeze landed mid-read: this chunk is lost, like on a dead link
                    peers[sock].sendall(data)
            except OSError:
                for s in (client, server):
                    with contextlib.suppress(OSError):
                        s.close()
                return
