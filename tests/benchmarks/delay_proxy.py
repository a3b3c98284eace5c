"""A TCP proxy that adds a fixed one-way delay in each direction: a network of a chosen RTT on loopback.

    python -m tests.benchmarks.delay_proxy --upstream 127.0.0.1:5432 --delay-ms 0.5   # +1 ms RTT

This kernel has no netem, so the network benchmarks (tests/benchmarks/network.py) put this in
front of PostgreSQL and in front of Redis alike. Every chunk read from one side is written to the
other side `delay` later, in order; the proxy does not batch or slow the flow otherwise, so many
requests in flight (pipelining) still overlap, as on a real link.

It prints "listening PORT" once ready, then obeys lines on stdin: "stats" prints one JSON line of
counters, "reset" zeroes them. `turns` counts round trips: the times a connection's client spoke
after the server had (or first); pipelined statements sent together count once.

The event loop runs on select(), whose timeout has microsecond resolution; epoll's is a whole
millisecond, which would round a 0.25 ms delay up to 1 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import selectors
import sys
import threading
from dataclasses import asdict, dataclass


@dataclass
class Counters:
    """What went through the proxy since the last reset."""

    connections: int = 0
    turns: int = 0  # client requests that followed a server reply: round trips
    chunks_up: int = 0
    chunks_down: int = 0
    bytes_up: int = 0
    bytes_down: int = 0


class DelayProxy:
    """Listen on `listen`, forward to `upstream`, `delay` seconds each way."""

    def __init__(self, upstream: tuple[str, int], delay: float) -> None:
        self.upstream = upstream
        self.delay = delay
        self.counters = Counters()

    async def serve(self, host: str, port: int) -> asyncio.Server:
        return await asyncio.start_server(self._connection, host, port)

    async def _connection(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection(*self.upstream)
        except OSError:
            client_w.close()
            return
        self.counters.connections += 1
        last = ["server"]  # who spoke last on this connection; a client chunk after the server is a turn
        await asyncio.gather(self._direction(client_r, server_w, "up", last),
                             self._direction(server_r, client_w, "down", last), return_exceptions=True)
        for w in (client_w, server_w):
            w.close()

    async def _direction(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, way: str,
                         last: list[str]) -> None:
        loop = asyncio.get_running_loop()
        pending: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, data = await pending.get()
                if not data:
                    writer.close()
                    return
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()

        sender = asyncio.create_task(deliver())
        try:
            while True:
                data = await reader.read(65536)
                if way == "up":
                    if data and last[0] == "server":
                        self.counters.turns += 1
                    self.counters.chunks_up += 1
                    self.counters.bytes_up += len(data)
                else:
                    self.counters.chunks_down += 1
                    self.counters.bytes_down += len(data)
                if data:
                    last[0] = "client" if way == "up" else "server"
                pending.put_nowait((loop.time() + self.delay, data))
                if not data:
                    break
            await sender
        except (OSError, asyncio.CancelledError):
            sender.cancel()
            raise


def _commands(proxy: DelayProxy, loop: asyncio.AbstractEventLoop) -> None:
    """stdin control, on a thread: the loop's own thread never blocks on it."""
    for line in sys.stdin:
        word = line.strip()
        if word == "stats":
            snapshot = asdict(proxy.counters)
            print(json.dumps(snapshot), flush=True)
        elif word == "reset":
            loop.call_soon_threadsafe(setattr, proxy, "counters", Counters())
            print("{}", flush=True)
    loop.call_soon_threadsafe(loop.stop)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True, help="HOST:PORT to forward to")
    parser.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT to listen on (port 0: any free)")
    parser.add_argument("--delay-ms", type=float, default=0.0, help="one-way delay, each direction (RTT/2)")
    args = parser.parse_args(argv)
    up_host, up_port = args.upstream.rsplit(":", 1)
    host, port = args.listen.rsplit(":", 1)
    loop = asyncio.SelectorEventLoop(selectors.SelectSelector())
    asyncio.set_event_loop(loop)
    proxy = DelayProxy((up_host, int(up_port)), args.delay_ms / 1000.0)
    server = loop.run_until_complete(proxy.serve(host, int(port)))
    print(f"listening {server.sockets[0].getsockname()[1]}", flush=True)
    threading.Thread(target=_commands, args=(proxy, loop), daemon=True).start()
    try:
        loop.run_forever()
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
