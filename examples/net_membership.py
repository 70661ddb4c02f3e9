"""Failure detection on a cluster started in one command: heartbeats, up and down events.

Run it with ``python examples/net_membership.py``. Three ``Watcher`` nodes run as a cluster
(``blooml run --cluster``, one config file: names, addresses, the cluster key, ``--trace``);
a fourth watcher runs in this process and joins by sending heartbeats to them. Each watcher
mixes in ``blooml.net.membership.Membership`` (a heartbeat every 0.2 s, a peer declared down
after 1 s of silence) and logs the ``peer_up``/``peer_down`` events it sees. The demo kills
one node with SIGKILL, measures how long this process takes to declare it down (the bound is
``timeout + 2 * period`` plus the network delay), stops the cluster cleanly and writes the
nodes' traces as one space-time page with ``blooml trace html``.

``main()`` returns what it printed, for the test suite.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from blooml import bloom, table
from blooml.cli import main as blooml_main
from blooml.net.membership import Membership, detection_bound

HERE = Path(__file__).resolve()
PERIOD, TIMEOUT = 0.2, 1.0
KEY = "membership-demo-key"


class Watcher(Membership, period=PERIOD, timeout=TIMEOUT):
    """Heartbeat membership, and a log of the up/down events this node saw."""

    events = table(["seq", "addr", "event"])

    # fmt: off
    @bloom
    def log_events(self) -> None:
        self.events <= self.peer_up.map(lambda u: (self.tick_count, u.addr, "up"))
        self.events <= self.peer_down.map(lambda d: (self.tick_count, d.addr, "down"))
    # fmt: on


def free_ports(n: int) -> list[int]:
    """``n`` UDP ports free on 127.0.0.1 now (the cluster binds them a moment later)."""
    socks: list[socket.socket] = []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [int(s.getsockname()[1]) for s in socks]
    for s in socks:
        s.close()
    return ports


def cluster_file(folder: Path, ports: list[int]) -> Path:
    """The cluster's config: three watchers that know each other, signed with one key."""
    lines = [
        f'target = "{HERE}:Watcher"',
        'members = "member"',
        f'cluster_key = "{KEY}"',
        "",
    ]
    for name, port in zip("abc", ports, strict=True):
        lines += [f"[nodes.{name}]", f'address = "127.0.0.1:{port}"', ""]
    path = folder / "cluster.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def view(p: Watcher) -> set[str]:
    """The peers ``p`` believes up."""
    return p.sync_do(lambda q: {str(r.addr) for r in q.up})


def main(timeout: float = 30.0) -> dict[str, Any]:
    """Start the cluster, watch it, kill a node, detect it, stop, write the traces."""
    folder = Path(tempfile.mkdtemp(prefix="blooml-membership-"))
    ports = free_ports(3)
    config = cluster_file(folder, ports)
    traces = folder / "traces"
    cmd = [sys.executable, "-m", "blooml", "run", "--cluster", str(config)]
    cmd += ["--trace", str(traces), "--summary-every", "60"]
    cluster = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out: list[str] = []
    err: list[str] = []

    # Both pipes are drained: the nodes' logs reach the cluster command's stderr, and a full
    # pipe nobody reads would block the cluster (and its nodes) until it is killed.
    def read(stream: Any, into: list[str]) -> None:
        into.extend(line.rstrip("\n") for line in stream)

    for stream, into in ((cluster.stdout, out), (cluster.stderr, err)):
        threading.Thread(target=read, args=(stream, into), daemon=True).start()
    me = Watcher(addr="127.0.0.1:0", cluster_key=KEY.encode()).start()
    nodes = {f"127.0.0.1:{p}" for p in ports}
    deadline = time.monotonic() + timeout
    try:
        me.sync_do(lambda q: q.member.insert([(a,) for a in nodes]))
        while time.monotonic() < deadline:
            if view(me) == nodes and any(" up: " in ln for ln in list(out)):
                break
            time.sleep(0.05)
        up = view(me)
        print(f"cluster of {len(nodes)} up in one command; this node sees {len(up)} of them")
        found = (re.match(r".* node (\w) \(pid (\d+)\)", ln) for ln in list(out))
        pids = {m[1]: int(m[2]) for m in found if m}
        victim = f"127.0.0.1:{ports[2]}"
        os.kill(pids["c"], signal.SIGKILL)
        killed = time.monotonic()
        while victim in view(me) and time.monotonic() < deadline:
            time.sleep(0.01)
        detected = time.monotonic() - killed
        bound = detection_bound(PERIOD, TIMEOUT)
        print(f"node c killed: declared down after {detected:.2f} s (bound {bound:.1f} s + delay)")
        still = view(me)
        events = me.sync_do(lambda q: sorted((str(r.addr), str(r.event)) for r in q.events))
    finally:
        me.stop()
        cluster.send_signal(signal.SIGTERM)
        try:  # it stops each node in turn, killing one that takes over 10 s: allow for that
            code = cluster.wait(max(timeout, 75.0))
        except subprocess.TimeoutExpired:
            cluster.kill()
            code = cluster.wait()
    written = sorted(p.name for p in traces.glob("*.jsonl"))
    html = folder / "trace.html"
    blooml_main(["trace", "html", *(str(traces / n) for n in written), "-o", str(html)])
    print(f"cluster stopped (exit status {code}: a node had died); traces {written} -> {html}")
    return {
        "up": sorted(up),
        "nodes": sorted(nodes),
        "victim": victim,
        "still_up": sorted(still),
        "detected": detected,
        "bound": bound,
        "events": events,
        "exit_code": code,
        "log": err,
        "traces": written,
        "html": html,
    }


if __name__ == "__main__":
    main()
