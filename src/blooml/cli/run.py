"""``blooml run TARGET --address HOST:PORT``: run a Bloom^L program as a network node.

``TARGET`` is ``package.module:Class`` or ``path/to/file.py:Class`` naming a ``Program``
subclass. The node binds ``--address`` (UDP, or TCP with ``--transport tcp``), applies the rows
given with ``--insert`` (or ``--insert-file``) at its first tick, then runs until SIGINT or
SIGTERM (or ``--duration`` seconds), logging each failed tick and a one-line summary every
``--summary-every`` seconds; ``--trace FILE`` writes its tick trace. ``--cluster FILE`` runs
every node of a cluster file instead (see :mod:`blooml.cli._cluster`). Exit status: 0 stopped
cleanly; 1 a node of a cluster failed; 2 bad usage (a target that cannot be imported, an
address that cannot be bound, bad seed rows, a bad cluster file).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

from blooml.cli._target import UsageError, load_target

__all__ = ["NAME", "register", "run", "summary"]

NAME = "run"
log = logging.getLogger("blooml.run")
_DESCRIPTION = """\
Run a Bloom^L program as a network node. TARGET is package.module:Class or
path/to/file.py:Class naming a Program subclass. The node binds --address (UDP, or TCP with
--transport tcp), applies the rows given with --insert (or --insert-file) at its first tick,
then runs until SIGINT or SIGTERM (or --duration seconds), logging each failed tick and a
one-line summary every --summary-every seconds. --trace FILE records every tick.

With --cluster FILE, runs every node of a cluster file instead (one child process each; their
log lines prefixed with [name]) until SIGINT or SIGTERM (or --duration), then stops them all;
--trace DIR writes DIR/NAME.jsonl for each node.

example:
  blooml run mypkg.kvs:KVS --address 127.0.0.1:7000 --insert 'peer=[["127.0.0.1:7001"]]'
  blooml run --cluster examples/net_membership.toml --trace traces/

exit status: 0 stopped cleanly, 1 a node of a cluster failed or did not stop cleanly, 2 bad
usage (a target that cannot be imported, an address that cannot be bound, bad seed rows, a
bad cluster file)"""


def register(subparsers: Any) -> None:
    """Add the ``run`` subcommand to ``subparsers``."""
    p = subparsers.add_parser(
        NAME,
        help="run a Bloom^L program as a network node",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "target",
        nargs="?",
        help="package.module:Class or path/to/file.py:Class (a Program); not with --cluster",
    )
    p.add_argument("--address", help="host:port to bind (port 0: any free port)")
    p.add_argument(
        "--cluster",
        metavar="FILE",
        help="run every node of this cluster file (TOML, or .json): names, addresses, "
        "target, cluster key, data dirs; see docs/net.md",
    )
    p.add_argument(
        "--trace",
        metavar="PATH",
        help="write the node's tick trace to this file (with --cluster: a directory, one "
        "NAME.jsonl per node), for blooml trace show/html",
    )
    p.add_argument("--transport", choices=("udp", "tcp"), default="udp")
    p.add_argument("--data-dir", help="directory for durable state (passed as data_dir=)")
    p.add_argument("--cluster-key-file", help="file holding the cluster key (signs datagrams)")
    p.add_argument(
        "--insert",
        action="append",
        default=[],
        metavar="COLL=JSON",
        help="rows to insert before the first tick, as a JSON list of lists (repeatable)",
    )
    p.add_argument(
        "--insert-file", help='a JSON file {"collection": [[...], ...], ...} of rows to insert'
    )
    p.add_argument("--summary-every", type=float, default=5.0, metavar="SECONDS")
    p.add_argument("--duration", type=float, help="stop after this many seconds")
    p.add_argument(
        "--drop-rate",
        type=float,
        default=0.0,
        help="fault injection: lose this fraction of outgoing datagrams (0..1)",
    )
    p.add_argument(
        "--max-delay",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="fault injection: delay each outgoing datagram by a random 0..SECONDS (reorders)",
    )
    p.add_argument("--log-level", default="INFO")
    p.set_defaults(func=run)


def _rows(coll: str, value: Any, where: str) -> list[tuple[Any, ...]]:
    if not isinstance(value, list):
        raise UsageError(f"{where}: rows for {coll!r} must be a JSON list, got {value!r}")
    return [tuple(r) if isinstance(r, list) else (r,) for r in value]


def _seeds(ns: argparse.Namespace) -> dict[str, list[tuple[Any, ...]]]:
    out: dict[str, list[tuple[Any, ...]]] = {}
    for item in ns.insert:
        coll, sep, text = item.partition("=")
        if not sep or not coll:
            raise UsageError(f"--insert {item!r}: expected COLLECTION=JSON_ROWS")
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--insert {item!r}: bad JSON: {exc}") from None
        out.setdefault(coll, []).extend(_rows(coll, value, "--insert"))
    if ns.insert_file:
        try:
            data = json.loads(Path(ns.insert_file).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise UsageError(f"--insert-file {ns.insert_file}: {exc}") from None
        if not isinstance(data, dict):
            raise UsageError(f"--insert-file {ns.insert_file}: expected a JSON object")
        for coll, value in data.items():
            out.setdefault(coll, []).extend(_rows(coll, value, "--insert-file"))
    return out


def summary(stats: dict[str, Any]) -> str:
    """The one-line summary of a node's counters."""
    dropped = stats.get("dropped") or {}
    parts = ",".join(f"{k}:{v}" for k, v in sorted(dropped.items()))
    return (
        f"{stats['addr']}: ticks={stats['ticks']} errors={stats['errors']} "
        f"recv={stats['received']}/{stats['received_tuples']}t "
        f"sent={stats['sent']}/{stats['sent_tuples']}t "
        f"dropped={stats['dropped_total']}{' (' + parts + ')' if parts else ''} "
        f"discarded={stats['discarded_batches']} inbox={stats['inbox']}"
    )


def run(ns: argparse.Namespace) -> int:
    """Run the subcommand; return the exit status."""
    from blooml.bloom.program import Program
    from blooml.errors import BloomlError
    from blooml.net import node

    if ns.cluster is not None:
        if ns.target is not None or ns.address is not None:
            print(
                "blooml run: --cluster FILE takes the targets and addresses from the file; "
                "give no TARGET and no --address",
                file=sys.stderr,
            )
            return 2
        per_node = {
            "--transport": ns.transport != "udp",
            "--data-dir": ns.data_dir is not None,
            "--cluster-key-file": ns.cluster_key_file is not None,
            "--insert": bool(ns.insert),
            "--insert-file": ns.insert_file is not None,
            "--drop-rate": ns.drop_rate != 0.0,
            "--max-delay": ns.max_delay != 0.0,
        }
        given = [flag for flag, set_ in per_node.items() if set_]
        if given:
            print(
                f"blooml run: {', '.join(given)} not with --cluster: set it in the cluster "
                "file (for one node: args = [...] in its [nodes.NAME] table)",
                file=sys.stderr,
            )
            return 2
        from blooml.cli._cluster import run_cluster

        return run_cluster(ns)
    if ns.target is None or ns.address is None:
        print(
            "blooml run: give a TARGET and --address HOST:PORT (or --cluster FILE)",
            file=sys.stderr,
        )
        return 2
    logging.basicConfig(
        level=getattr(logging, str(ns.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        cls = load_target(ns.target)
        if not (isinstance(cls, type) and issubclass(cls, Program)):
            raise UsageError(f"{ns.target} is not a Program subclass")
        seeds = _seeds(ns)
        kwargs: dict[str, Any] = {"addr": ns.address, "transport": ns.transport}
        if ns.cluster_key_file:
            try:
                kwargs["cluster_key"] = Path(ns.cluster_key_file).read_bytes().strip()
            except OSError as exc:
                raise UsageError(f"--cluster-key-file: {exc}") from None
        if ns.data_dir:
            kwargs["data_dir"] = ns.data_dir
        if ns.trace:
            kwargs["trace"] = ns.trace
        try:
            p = cls(**kwargs)
        except (BloomlError, OSError) as exc:
            raise UsageError(f"cannot start {ns.target} at {ns.address}: {exc}") from None
        n = node(p)
        if not 0.0 <= ns.drop_rate <= 1.0:
            n.stop()
            raise UsageError(f"--drop-rate must be in [0, 1], got {ns.drop_rate}")
        n.drop_rate = ns.drop_rate
        if ns.max_delay < 0:
            n.stop()
            raise UsageError(f"--max-delay must be >= 0, got {ns.max_delay}")
        n.max_delay = ns.max_delay
        for coll, rows in seeds.items():
            if coll not in p._rt.rels:
                n.stop()
                raise UsageError(f"--insert: {cls.__qualname__} has no collection {coll!r}")
            try:
                getattr(p, coll).insert(rows)
            except BloomlError as exc:
                n.stop()
                raise UsageError(f"--insert {coll}: {exc}") from None
    except UsageError as exc:
        print(f"blooml run: {exc}", file=sys.stderr)
        return 2
    n.run(
        duration=ns.duration,
        every=ns.summary_every,
        on_every=lambda: log.info(summary(n.stats())),
        on_start=lambda: print(
            f"blooml run: {cls.__qualname__} at {p.addr} ({ns.transport})", flush=True
        ),
    )
    log.info("stopped: %s", summary(n.stats()))
    return 0
