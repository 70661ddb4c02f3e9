"""``NodeProcess``: a program run as a separate OS process with ``blooml run``.

For examples, tests and local clusters::

    with NodeProcess("examples/net_quorum.py:Voter", inserts={"leader": [(leader.addr,)]}) as v:
        print(v.addr)          # the address the child bound (port 0 picks a free port)

The child is ``python -m blooml run TARGET --address ...``; ``stop()`` sends SIGTERM (the node
stops cleanly) and ``kill()`` SIGKILL.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from blooml.errors import BloomlError

__all__ = ["NodeProcess"]


class NodeProcess:
    """A node in a child process.

    Args:
        target: ``package.module:Class`` or ``path/to/file.py:Class``.
        address: the address to bind (default ``127.0.0.1:0``: a free port).
        inserts: rows to insert before the first tick, ``{collection: [row, ...]}``
            (JSON-encodable values only).
        transport: ``"udp"`` or ``"tcp"``.
        args: more ``blooml run`` arguments (``["--cluster-key-file", path]``).
        timeout: seconds to wait for the child to bind its address.
    """

    def __init__(
        self,
        target: str,
        address: str = "127.0.0.1:0",
        *,
        inserts: Mapping[str, Sequence[Sequence[Any]]] | None = None,
        transport: str = "udp",
        args: Sequence[str] = (),
        timeout: float = 20.0,
        env: Mapping[str, str] | None = None,
    ) -> None:
        cmd = [sys.executable, "-m", "blooml", "run", target, "--address", address]
        cmd += ["--transport", transport, *args]
        for coll, rows in (inserts or {}).items():
            cmd += ["--insert", f"{coll}={json.dumps([list(r) for r in rows])}"]
        self.target = target
        self.log: list[str] = []
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(self.proc.stdout.readline()))  # type: ignore[union-attr]
        reader.daemon = True
        reader.start()
        reader.join(timeout)
        first = line[0] if line else ""
        if " at " not in first:
            self.kill()
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise BloomlError(f"NodeProcess {target}: the child did not start: {first!r} {err}")
        #: The address the child bound.
        self.addr = first.rsplit(" at ", 1)[1].split(" ")[0]
        self._drain = threading.Thread(target=self._read_stderr, daemon=True)
        self._drain.start()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            if len(self.log) < 10_000:
                self.log.append(line.rstrip("\n"))

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM the child and wait for it; return its exit status."""
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(timeout)

    def kill(self) -> None:
        """SIGKILL the child."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)

    def __enter__(self) -> NodeProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.proc.poll() is None else f"exited {self.proc.returncode}"
        return f"<NodeProcess {self.target} at {getattr(self, 'addr', '?')} {state}>"
