"""``blooml run --cluster FILE``: several nodes from one config file, on loopback, end to end;
``--trace`` for one node and for a cluster; the config's errors."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from blooml.cli import main
from blooml.cli._cluster import load_config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WATCHER = f"{EXAMPLES / 'net_membership.py'}:Watcher"


def free_ports(n: int) -> list[int]:
    socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def write_cluster(folder: Path, ports: list[int]) -> Path:
    (folder / "cluster.key").write_text("s3cret\n")
    nodes = "".join(
        f'[nodes.{n}]\naddress = "127.0.0.1:{p}"\n' for n, p in zip("abc", ports, strict=True)
    )
    cfg = folder / "cluster.toml"
    cfg.write_text(
        f'target = "{WATCHER}"\nmembers = "member"\ncluster_key_file = "cluster.key"\n'
        f'data_dir = "state"\n\n{nodes}'
    )
    return cfg


def test_a_cluster_in_one_command_exchanges_heartbeats_stops_cleanly_and_writes_traces(
    tmp_path: Path,
) -> None:
    ports = free_ports(3)
    cfg = write_cluster(tmp_path, ports)
    traces = tmp_path / "traces"
    cmd = [sys.executable, "-m", "blooml", "run", "--cluster", str(cfg), "--trace", str(traces)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out: list[str] = []
    threading.Thread(target=lambda: out.extend(proc.stdout or []), daemon=True).start()
    try:
        deadline = time.monotonic() + 30
        while not any(" up: 3 nodes" in ln for ln in out) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.05)
        assert any(" up: 3 nodes" in ln for ln in out), out
        for name, port in zip("abc", ports, strict=True):
            assert any(f"node {name} (pid " in ln and f"127.0.0.1:{port}" in ln for ln in out)
        time.sleep(1.0)  # five heartbeat periods
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(30)
        err = proc.stderr.read() if proc.stderr else ""
    assert code == 0, err
    assert all(f"node {n} stopped (0)" in err for n in "abc"), err
    # each node wrote its trace; heartbeats went between every pair of nodes, signed
    files = sorted(p.name for p in traces.glob("*.jsonl"))
    assert files == ["a.jsonl", "b.jsonl", "c.jsonl"]
    addr = {n: f"127.0.0.1:{p}" for n, p in zip("abc", ports, strict=True)}
    for n in "abc":
        events = [json.loads(ln) for ln in (traces / f"{n}.jsonl").read_text().splitlines()]
        assert events[0]["ev"] == "run" and events[0]["node"] == addr[n]
        got = {e["from"] for e in events if e["ev"] == "recv" and e["chan"] == "heartbeat"}
        assert got == {addr[o] for o in "abc" if o != n}
    # the traces make one space-time page
    html = tmp_path / "trace.html"
    assert main(["trace", "html", *(str(traces / f) for f in files), "-o", str(html)]) == 0
    assert html.stat().st_size > 1000


def test_the_single_node_trace_flag(tmp_path: Path) -> None:
    trace = tmp_path / "one.jsonl"
    out = subprocess.run(
        [
            *(sys.executable, "-m", "blooml", "run", WATCHER, "--address", "127.0.0.1:0"),
            *("--duration", "0.5", "--trace", str(trace)),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    first = json.loads(trace.read_text().splitlines()[0])
    assert first["ev"] == "run" and first["program"].endswith("Watcher")


def test_a_node_that_dies_is_reported_and_the_others_keep_running(tmp_path: Path) -> None:
    ports = free_ports(2)
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'target = "{WATCHER}"\n'
        f'[nodes.a]\naddress = "127.0.0.1:{ports[0]}"\n'
        f'[nodes.b]\naddress = "127.0.0.1:{ports[1]}"\n'
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "blooml", "run", "--cluster", str(cfg)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out: list[str] = []
    threading.Thread(target=lambda: out.extend(proc.stdout or []), daemon=True).start()
    try:
        deadline = time.monotonic() + 30
        while not any(" up: 2 nodes" in ln for ln in out) and time.monotonic() < deadline:
            time.sleep(0.05)
        pid = int(next(ln for ln in out if "node b (pid" in ln).split("pid ")[1].split(")")[0])
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
        assert proc.poll() is None  # a still runs
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(30)
    err = proc.stderr.read() if proc.stderr else ""
    assert code == 1
    assert "node b exited (-9)" in err and "node a stopped (0)" in err


BAD_CONFIGS = [
    ("nodes = 3", "no nodes"),
    ('target = "m:C"\nnodes = { a = 3 }', "nodes.a: expected a table of settings, got 3"),
    ('target = "m:C"\n[nodes.a]\nport = 1', "unknown setting ['port']"),
    ('target = "m:C"\n[nodes.a]\ntarget = "m:C"', "nodes.a: no address"),
    ('[nodes.a]\naddress = "127.0.0.1:1"', "nodes.a: no target"),
    ('target = "m:C"\n[nodes.a]\naddress = "localhost"', "must be host:port"),
    (
        'target = "m:C"\n[nodes.a]\naddress = "h:1"\n[nodes.b]\naddress = "h:1"',
        "is also nodes.a's",
    ),
    ('target = "m:C"\nmembers = "m"\n[nodes.a]\naddress = "h:0"', "port 0 cannot be told"),
    (
        'target = "m:C"\ncluster_key = "k"\ncluster_key_file = "f"\n[nodes.a]\naddress = "h:1"',
        "not both",
    ),
    ('target = "m:C"\nwat = 1\n[nodes.a]\naddress = "h:1"', "unknown setting ['wat']"),
    ('target = "m:C"\n[nodes.a]\naddress = "h:1"\ntransport = "sctp"', "transport must be"),
    ("this is = not toml [", "bad TOML"),
]


@pytest.mark.parametrize(("text", "message"), BAD_CONFIGS)
def test_bad_cluster_files_exit_2_naming_the_setting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text)
    assert main(["run", "--cluster", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert message in err and str(cfg) in err


def test_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--cluster", str(tmp_path / "missing.toml")]) == 2
    assert "cannot read it" in capsys.readouterr().err
    assert main(["run", WATCHER]) == 2
    assert "give a TARGET and --address" in capsys.readouterr().err
    assert main(["run", WATCHER, "--cluster", "x.toml"]) == 2
    assert "give no TARGET" in capsys.readouterr().err
    assert main(["run", "--cluster", "x.toml", "--drop-rate", "0.1", "--insert", "a=[]"]) == 2
    assert "--insert, --drop-rate not with --cluster" in capsys.readouterr().err


def test_paths_are_relative_to_the_config_and_json_works(tmp_path: Path) -> None:
    cfg = tmp_path / "c.json"
    cfg.write_text(
        json.dumps(
            {
                "target": "prog.py:P",
                "data_dir": "state",
                "cluster_key_file": "k",
                "nodes": {"a": {"address": "h:1"}, "b": {"address": "h:2", "data_dir": "/x"}},
            }
        )
    )
    c = load_config(cfg)
    assert [n.target for n in c.nodes] == [f"{tmp_path / 'prog.py'}:P"] * 2
    assert [n.data_dir for n in c.nodes] == [str(tmp_path / "state" / "a"), "/x"]
    assert c.key_file == str(tmp_path / "k")
