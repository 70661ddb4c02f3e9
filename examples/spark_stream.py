"""Shortest paths on Spark Structured Streaming: each micro-batch of road links is one tick.

Run it with ``python examples/spark_stream.py`` (needs ``pip install 'blooml[spark]'`` and
Java 17). Road links arrive as JSON files in a folder (a file source, one file per
micro-batch); every micro-batch is one tick of the ``Paths`` program of
``examples/shortest_paths.py``, run by ``SparkEngine`` as DataFrame plans; after each tick the
cheapest cost per pair (``best``, an ``lmin`` column stored as its value) is written to
Parquet under ``out/best/tick=<n>``. The stream stops after the first two files and starts
again, as after a driver restart: the program's state comes back from the checkpoint
location, and the last two files extend it (the last one is a shortcut, which lowers costs).

``python examples/spark_stream.py --remote local[2]`` runs it on Spark Connect (a local Connect
server; or ``--remote sc://host:15002`` for a server whose Python imports blooml and this
folder's ``shortest_paths``, and can write the working directory): the ticks then run in the
server's Python.

``main()`` returns what it printed, for the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from shortest_paths import ROADS, SHORTCUT, Paths, dijkstra

from blooml.spark import SparkEngine, tick_stream

BATCHES = [ROADS[:4], ROADS[4:7], ROADS[7:], [SHORTCUT]]


def _write(folder: Path, i: int, links: Sequence[tuple[str, str, int]]) -> None:
    path = folder / f"links-{i}.json"
    path.write_text("".join(json.dumps({"src": s, "dst": d, "c": c}) + "\n" for s, d, c in links))
    t = 1_700_000_000 + 10 * i
    os.utime(path, (t, t))  # the file source reads files in modification-time order


def _ticks(spark: Any, folder: Path, work: Path) -> SparkEngine:
    engine = SparkEngine(spark, program=Paths)
    links = (
        spark.readStream.schema("src string, dst string, c bigint")
        .option("maxFilesPerTrigger", 1)
        .json(str(folder))
    )
    query = tick_stream(
        engine,
        links,
        "link",
        checkpoint_location=str(work / "checkpoint"),
        outputs={"best": str(work / "out" / "best")},
        available_now=True,
    )
    query.awaitTermination()
    return engine


def _session(remote: str | None) -> Any:
    from pyspark.sql import SparkSession

    if remote is None:
        spark = (
            SparkSession.builder.master("local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "4")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        return spark
    if remote.startswith("local"):  # the local server's Python imports shortest_paths from here
        here = str(Path(__file__).resolve().parent)
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (here, os.environ.get("PYTHONPATH")) if p
        )
    return (
        SparkSession.builder.remote(remote)
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )


def main(
    spark: Any = None, workdir: str | None = None, remote: str | None = None
) -> dict[str, Any]:
    """Run the stream in two parts (a restart between them); print and return the costs.

    ``remote``: a Spark Connect URL (``"local[2]"``, ``"sc://host:15002"``) for the session
    this function creates when ``spark`` is not given."""
    own = spark is None
    if own:
        spark = _session(remote)
    work = Path(workdir or tempfile.mkdtemp(prefix="blooml-stream-")).resolve()
    folder = work / "in"
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {}
    try:
        for i in (0, 1):
            _write(folder, i, BATCHES[i])
        _ticks(spark, folder, work)
        print("two micro-batches (ticks 0 and 1) done; the query stopped")
        for i in (2, 3):
            _write(folder, i, BATCHES[i])
        _ticks(spark, folder, work)  # a new engine: the state comes from the checkpoint
        print("restarted: ticks 2 and 3 done")
        best_dir = work / "out" / "best"
        for tick in range(4):
            rows = spark.read.parquet(str(best_dir / f"tick={tick}")).collect()
            costs = {(r.src, r.dst): r.c for r in rows}
            out[f"tick {tick}"] = costs
            print(
                f"tick {tick}: {len(costs)} pairs, amsterdam->rotterdam {costs.get(('amsterdam', 'rotterdam'))}"
            )
        links = [*ROADS, SHORTCUT]
        want = {(s, d): c for s in {s for s, _, _ in links} for d, c in dijkstra(links, s).items()}
        final = out["tick 3"]
        print("final costs equal Dijkstra's:", final == want)
        if final != want:
            print("MISMATCH", sorted(set(final.items()) ^ set(want.items())))
        out["equal"] = final == want
        print(f"Parquet output under {best_dir}")
    finally:
        if own:
            spark.stop()
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Shortest paths as Spark micro-batches")
    parser.add_argument("--remote", help="a Spark Connect URL: local[2], sc://host:15002")
    parser.add_argument(
        "--workdir", help="input, checkpoint and output folder (default: a new one)"
    )
    args = parser.parse_args()
    main(workdir=args.workdir, remote=args.remote)
