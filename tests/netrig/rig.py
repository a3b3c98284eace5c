"""A rig of "hosts" on one machine: Linux network namespaces joined to the host by veth pairs.

    rig = NetRig.create(hosts=5)      # namespaces skl<tag>h1..h5, addresses 10.213.<x>.11..15
    rig.gateway                       # the host side's address (PostgreSQL listens there)
    rig.argv("h1", [python, "-m", "skiplock"])   # run a command inside host h1
    rig.cut("h1"); rig.heal("h1")     # partition h1 (its link down) and bring it back
    rig.destroy()

Each namespace has one veth whose peer sits on a bridge in the root namespace; the bridge holds
the gateway address. Cutting a host sets its bridge-side veth down: packets in both directions
are dropped and no RST or FIN is ever sent, as when a switch port or a host's NIC dies. The rig
only uses the addresses it assigned itself (10.213.<x>.0/24) and creates, and deletes, every
interface and namespace it uses. It needs root (CAP_NET_ADMIN); `unavailable()` says why not.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "skl"  # every interface and namespace of a rig starts with this, then a 4-hex tag
OWNERS = Path("/run/skiplock-netrig")  # <tag>: the pid of the process that built that rig


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


def unavailable() -> str | None:
    """Why a rig cannot be built here, or None when it can."""
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root (CAP_NET_ADMIN)"
    probe = f"{PREFIX}probe{os.getpid() % 10000}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def _used_subnets() -> set[int]:
    """Third octets of 10.213.x.0 networks already on some interface (another rig, or anyone's)."""
    text = _ip("-4", "-o", "addr").stdout
    return {int(m) for m in re.findall(r"inet 10\.213\.(\d+)\.", text)}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_orphans() -> None:
    """Delete the rigs left by test runs that died without cleaning up (their builder is gone)."""
    if not OWNERS.is_dir():
        return
    for owner in OWNERS.iterdir():
        try:
            pid = int(owner.read_text().strip() or "0")
        except (OSError, ValueError):
            pid = 0
        if pid and _alive(pid):
            continue
        tag = owner.name
        hosts = sorted({m for m in re.findall(rf"{PREFIX}{tag}(h\d+)", _ip("netns", "list").stdout)})
        NetRig(tag=tag, octet=0, hosts=hosts).destroy()


@dataclass
class NetRig:
    """Namespaces h1..hN on a bridge; see the module docstring."""

    tag: str
    octet: int
    hosts: list[str]
    cut_hosts: set[str] = field(default_factory=set)

    @classmethod
    def create(cls, hosts: int) -> NetRig:
        """Build a bridge and `hosts` namespaces (h1..hN), each with its address and loopback up."""
        _remove_orphans()
        used = _used_subnets()
        octet = next(x for x in range(100 + os.getpid() % 100, 256) if x not in used)
        rig = cls(tag=secrets.token_hex(2), octet=octet, hosts=[f"h{i}" for i in range(1, hosts + 1)])
        OWNERS.mkdir(parents=True, exist_ok=True)
        (OWNERS / rig.tag).write_text(str(os.getpid()))
        try:
            rig._build()
        except BaseException:
            rig.destroy()
            raise
        return rig

    @property
    def gateway(self) -> str:
        """The root namespace's address on the rig: what the hosts connect to."""
        return f"10.213.{self.octet}.1"

    @property
    def network(self) -> str:
        return f"10.213.{self.octet}.0/24"

    def address(self, host: str) -> str:
        """Host `host`'s own address (h1 -> .11, h2 -> .12, ...)."""
        return f"10.213.{self.octet}.{10 + self._index(host)}"

    def namespace(self, host: str) -> str:
        return f"{PREFIX}{self.tag}{host}"

    def argv(self, host: str, argv: list[str]) -> list[str]:
        """`argv` to run inside `host`'s namespace."""
        return ["ip", "netns", "exec", self.namespace(host), *argv]

    def cut(self, host: str) -> None:
        """Partition `host`: its link goes down, every packet to or from it is dropped silently."""
        _ip("link", "set", self._outer(host), "down")
        self.cut_hosts.add(host)

    def heal(self, host: str) -> None:
        """Bring `host`'s link back up (the TCP connections that survived resume)."""
        _ip("link", "set", self._outer(host), "up")
        self.cut_hosts.discard(host)

    def pids(self, host: str) -> list[int]:
        """Processes running inside `host`'s namespace."""
        out = _ip("netns", "pids", self.namespace(host), check=False).stdout
        return [int(p) for p in out.split()]

    def destroy(self) -> None:
        """Delete every namespace and interface of this rig (processes left inside are killed first)."""
        for host in self.hosts:
            for pid in self.pids(host):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, 9)
            _ip("link", "del", self._outer(host), check=False)
            _ip("netns", "del", self.namespace(host), check=False)
        _ip("link", "del", self._bridge, check=False)
        (OWNERS / self.tag).unlink(missing_ok=True)

    # ---- building -----------------------------------------------------------------------------

    @property
    def _bridge(self) -> str:
        return f"{PREFIX}{self.tag}br"

    def _index(self, host: str) -> int:
        return self.hosts.index(host) + 1

    def _outer(self, host: str) -> str:
        return f"{PREFIX}{self.tag}{host}o"  # bridge side of the host's veth

    def _build(self) -> None:
        _ip("link", "add", self._bridge, "type", "bridge")
        _ip("addr", "add", f"{self.gateway}/24", "dev", self._bridge)
        _ip("link", "set", self._bridge, "up")
        for host in self.hosts:
            ns, outer, inner = self.namespace(host), self._outer(host), f"{PREFIX}{self.tag}{host}i"
            _ip("netns", "add", ns)
            _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
            _ip("link", "set", inner, "netns", ns)
            _ip("link", "set", outer, "master", self._bridge)
            _ip("link", "set", outer, "up")
            _ip("-n", ns, "addr", "add", f"{self.address(host)}/24", "dev", inner)
            _ip("-n", ns, "link", "set", inner, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
