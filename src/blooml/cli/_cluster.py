"""``blooml run --cluster FILE``: several nodes from one config file, in one command.

The file (TOML, or JSON when its name ends in ``.json``) names the nodes, their addresses,
the cluster key and the data directories::

    target = "examples/net_membership.py:Watcher"  # every node's program (a node may override)
    transport = "udp"                  # or "tcp"
    cluster_key_file = "cluster.key"   # or cluster_key = "a secret" (signs every datagram)
    data_dir = "state"                 # each node keeps its durable state in state/<name>
    members = "member"                 # each node gets the other nodes' addresses in it

    [nodes.a]
    address = "127.0.0.1:7101"
    [nodes.b]
    address = "127.0.0.1:7102"
    insert = { member = [["127.0.0.1:7200"]] }   # more rows for this node (JSON-like)
    args = ["--drop-rate", "0.1"]                # more `blooml run` arguments

Relative paths (a ``path/to/file.py`` target, the key file, data directories) are relative
to the config file. Each node is a child ``python -m blooml run`` process (a crash of one is
the crash of one node); the parent prints each node's address once bound, forwards the
children's log lines prefixed with ``[name]``, and on SIGINT/SIGTERM (or after
``--duration``) stops them all with SIGTERM and waits. A node that exits on its own (a crash,
a ``kill -9``) is reported and the others keep running; the exit status is then 1. With
``--trace DIR`` each node writes its trace to ``DIR/<name>.jsonl``, ready for
``blooml trace html DIR/*.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from blooml.cli._target import UsageError

__all__ = ["ClusterConfig", "NodeConfig", "load_config", "run_cluster"]

_TOP_KEYS = {
    "target",
    "transport",
    "cluster_key",
    "cluster_key_file",
    "data_dir",
    "members",
    "nodes",
}
_NODE_KEYS = {"address", "target", "transport", "data_dir", "insert", "args"}
_START_TIMEOUT = 30.0  # seconds for a child to bind its address
_STOP_TIMEOUT = 10.0  # seconds for a child to stop after SIGTERM before it is killed


@dataclass
class NodeConfig:
    """One node of a cluster file: its ``name``, ``address``, program ``target``,
    ``transport``, ``data_dir`` (or ``None``), rows to ``insert`` and extra ``args``."""

    name: str
    address: str
    target: str
    transport: str
    data_dir: str | None
    insert: dict[str, list[list[Any]]] = field(default_factory=dict)
    args: list[str] = field(default_factory=list)


@dataclass
class ClusterConfig:
    """A parsed cluster file: its ``path``, the ``nodes`` in file order, the cluster key
    (``key_file`` or inline ``key``; ``None``: unsigned) and the ``members`` collection."""

    path: Path
    nodes: list[NodeConfig]
    key_file: str | None = None
    key: str | None = None
    members: str | None = None


def _read(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--cluster {path}: cannot read it: {exc.strerror or exc}") from None
    if path.suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--cluster {path}: bad JSON: {exc}") from None
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"--cluster {path}: bad TOML: {exc}") from None


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise UsageError(f"{where} must be a non-empty string, got {value!r}")
    return value


def _target(value: Any, base: Path, where: str) -> str:
    target = _str(value, where)
    module, sep, attr = target.rpartition(":")
    if sep and module.endswith(".py") and not Path(module).is_absolute():
        return f"{base / module}:{attr}"
    return target


def _path(value: Any, base: Path, where: str) -> str:
    p = Path(_str(value, where))
    return str(p if p.is_absolute() else base / p)


def _settings(table: Any, known: set[str], where: str) -> None:
    """Raise unless ``table`` is a table whose keys are all ``known`` settings."""
    if not isinstance(table, dict):
        raise UsageError(f"{where}: expected a table of settings, got {table!r}")
    unknown = sorted(set(table) - known)
    if unknown:
        raise UsageError(f"{where}: unknown setting {unknown} (known: {sorted(known)})")


def load_config(path: str | Path) -> ClusterConfig:
    """Parse and check a cluster file (see the module docstring).

    Raises:
        UsageError: the file cannot be read or parsed, or a key is unknown, missing or of
            the wrong type (the message names the file and the key).
    """
    path = Path(path)
    data = _read(path)
    where = f"--cluster {path}"
    _settings(data, _TOP_KEYS, where)
    base = path.resolve().parent
    nodes = data.get("nodes")
    if not isinstance(nodes, dict) or not nodes:
        raise UsageError(f"{where}: no nodes: add [nodes.NAME] tables with an address each")
    if "cluster_key" in data and "cluster_key_file" in data:
        raise UsageError(f"{where}: give cluster_key or cluster_key_file, not both")
    default_target = data.get("target")
    default_transport = data.get("transport", "udp")
    data_root = data.get("data_dir")
    cfg = ClusterConfig(path=path, nodes=[])
    if "cluster_key_file" in data:
        cfg.key_file = _path(data["cluster_key_file"], base, f"{where}: cluster_key_file")
    if "cluster_key" in data:
        cfg.key = _str(data["cluster_key"], f"{where}: cluster_key")
    if "members" in data:
        cfg.members = _str(data["members"], f"{where}: members")
    seen: dict[str, str] = {}
    for name, node in nodes.items():
        w = f"{where}: nodes.{name}"
        _settings(node, _NODE_KEYS, w)
        if "address" not in node:
            raise UsageError(f"{w}: no address (host:port)")
        address = _str(node["address"], f"{w}.address")
        host, sep, port = address.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise UsageError(f"{w}.address must be host:port, got {address!r}")
        if cfg.members and port == "0":
            raise UsageError(
                f"{w}.address {address!r}: port 0 cannot be told to the other nodes "
                f"(members = {cfg.members!r}); give a port"
            )
        if address in seen:
            raise UsageError(f"{w}.address {address!r} is also nodes.{seen[address]}'s")
        seen[address] = name
        target = node.get("target", default_target)
        if target is None:
            raise UsageError(f"{w}: no target: set target = 'module:Class' at the top or here")
        transport = node.get("transport", default_transport)
        if transport not in ("udp", "tcp"):
            raise UsageError(f"{w}: transport must be 'udp' or 'tcp', got {transport!r}")
        if "data_dir" in node:
            ddir: str | None = _path(node["data_dir"], base, f"{w}.data_dir")
        elif data_root is not None:
            ddir = str(Path(_path(data_root, base, f"{where}: data_dir")) / name)
        else:
            ddir = None
        insert = node.get("insert", {})
        if not isinstance(insert, dict) or not all(
            isinstance(rows, list) and all(isinstance(r, list) for r in rows)
            for rows in insert.values()
        ):
            raise UsageError(f"{w}.insert must map collections to lists of rows, got {insert!r}")
        args = node.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise UsageError(f"{w}.args must be a list of strings, got {args!r}")
        cfg.nodes.append(
            NodeConfig(
                name=str(name),
                address=address,
                target=_target(target, base, f"{w}.target"),
                transport=transport,
                data_dir=ddir,
                insert={str(k): list(v) for k, v in insert.items()},
                args=list(args),
            )
        )
    return cfg


def _command(
    cfg: ClusterConfig, node: NodeConfig, key_file: str | None, ns: argparse.Namespace
) -> list[str]:
    cmd = [sys.executable, "-m", "blooml", "run", node.target, "--address", node.address]
    cmd += ["--transport", node.transport, "--log-level", str(ns.log_level)]
    cmd += ["--summary-every", str(ns.summary_every)]
    if key_file:
        cmd += ["--cluster-key-file", key_file]
    if node.data_dir:
        cmd += ["--data-dir", node.data_dir]
    if ns.trace:
        cmd += ["--trace", str(Path(ns.trace) / f"{node.name}.jsonl")]
    inserts: dict[str, list[list[Any]]] = {k: list(v) for k, v in node.insert.items()}
    if cfg.members:
        others = [[n.address] for n in cfg.nodes if n is not node]
        inserts.setdefault(cfg.members, []).extend(others)
    for coll, rows in inserts.items():
        cmd += ["--insert", f"{coll}={json.dumps(rows)}"]
    return cmd + node.args


class _Child:
    """One node's child process, with its output forwarded line by line."""

    def __init__(self, node: NodeConfig, cmd: list[str]) -> None:
        self.node = node
        self.bound = threading.Event()
        self.banner = ""
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # a Ctrl-C reaches the parent, which stops each child
        )
        for stream, out in ((self.proc.stdout, sys.stdout), (self.proc.stderr, sys.stderr)):
            threading.Thread(target=self._forward, args=(stream, out), daemon=True).start()

    def _forward(self, stream: Any, out: Any) -> None:
        for line in stream:
            line = line.rstrip("\n")
            if not self.bound.is_set() and line.startswith("blooml run: "):
                self.banner = line[len("blooml run: ") :]
                self.bound.set()
                continue
            print(f"[{self.node.name}] {line}", file=out, flush=True)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            print(f"blooml run: node {self.node.name} did not stop: killed", file=sys.stderr)
            self.proc.kill()
            return self.proc.wait(_STOP_TIMEOUT)


def run_cluster(ns: argparse.Namespace) -> int:
    """Run every node of the cluster file ``ns.cluster`` until SIGINT/SIGTERM or
    ``ns.duration``; return 0 when every node stopped cleanly, 1 when one failed, 2 for a
    bad config."""
    try:
        cfg = load_config(ns.cluster)
        if ns.trace:
            try:
                Path(ns.trace).mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise UsageError(f"--trace {ns.trace}: {exc.strerror or exc}") from None
    except UsageError as exc:
        print(f"blooml run: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()
    handlers = _on_signals(stop.set)
    tmp = None
    children: list[_Child] = []
    try:
        key_file = cfg.key_file
        if cfg.key is not None:  # never on a command line: a 0600 file the parent removes
            tmp = tempfile.TemporaryDirectory(prefix="blooml-cluster-")
            key_path = Path(tmp.name) / "cluster.key"
            fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(cfg.key)
            key_file = str(key_path)
        for node in cfg.nodes:
            children.append(_Child(node, _command(cfg, node, key_file, ns)))
        status = _supervise(cfg, children, stop, ns.duration)
    finally:
        codes = [c.stop() for c in children]
        for c, code in zip(children, codes, strict=True):
            print(f"blooml run: node {c.node.name} stopped ({code})", file=sys.stderr)
        if tmp is not None:
            tmp.cleanup()
        _restore(handlers)
    if ns.trace and children:
        print(
            f"blooml run: traces in {ns.trace}/ (view: blooml trace html "
            f"{ns.trace}/*.jsonl -o trace.html)",
            file=sys.stderr,
        )
    return 1 if status or any(codes) else 0


def _supervise(
    cfg: ClusterConfig, children: list[_Child], stop: threading.Event, duration: float | None
) -> int:
    """Wait for every child to bind, then until ``stop``, ``duration`` or a child's exit."""
    deadline = time.monotonic() + _START_TIMEOUT
    for c in children:
        while not c.bound.wait(0.05):
            if c.proc.poll() is not None or time.monotonic() > deadline or stop.is_set():
                break
        if not c.bound.is_set():
            print(
                f"blooml run: node {c.node.name} ({c.node.target} at {c.node.address}) "
                "did not start",
                file=sys.stderr,
            )
            return 1
        print(f"blooml run: node {c.node.name} (pid {c.proc.pid}): {c.banner}", flush=True)
    print(f"blooml run: cluster {cfg.path} up: {len(children)} nodes", flush=True)
    end = None if duration is None else time.monotonic() + duration
    status = 0
    reported: set[str] = set()
    while not stop.is_set():
        if end is not None and time.monotonic() >= end:
            break
        for c in children:  # a node that dies is reported; the others keep running
            if c.proc.poll() is not None and c.node.name not in reported:
                reported.add(c.node.name)
                print(
                    f"blooml run: node {c.node.name} exited ({c.proc.returncode})",
                    file=sys.stderr,
                    flush=True,
                )
                status = 1
        if len(reported) == len(children):
            break
        stop.wait(0.1)
    return status


def _on_signals(fn: Any) -> Mapping[int, Any]:
    old: dict[int, Any] = {}
    if threading.current_thread() is not threading.main_thread():
        return old
    for sig in (signal.SIGINT, signal.SIGTERM):
        old[sig] = signal.signal(sig, lambda *_: fn())
    return old


def _restore(handlers: Mapping[int, Any]) -> None:
    for sig, h in handlers.items():
        signal.signal(sig, h)
