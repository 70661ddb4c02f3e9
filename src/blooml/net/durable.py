"""Durable state: a program's durable tables and lattice variables in SQLite.

``table(..., durable=True)`` and ``durable(lmax(0))`` declare it; ``P(data_dir=...)`` says
where it lives. The store is ``<data_dir>/state.sqlite3`` (WAL journal), written as the last
step of every tick in one transaction: the rows of durable tables that the tick changed
(upserted or deleted, by key), what durable lattice variables gained, the facts the tick
queued for the next one on durable names (``<+``, ``<-``, ``<+-``), and the tick count. If the
write fails, the tick rolls back; if the process dies (even by SIGKILL) the transaction is
either on disk whole or not at all. A program started on the same ``data_dir`` restores all of
it and continues with the next tick.

A lattice variable is stored as a *base* value (table ``lats``) and the *increments* merged
into it since (table ``lat_incs``): the tick's increment is the join of what the tick merged
into it, restricted for an ``lmap`` to the keys whose value changed; the restored value is the
base joined with every increment (a join is all a lattice variable ever does). A small value
(its last base under ``DurableStore.whole_below`` bytes) is simply rewritten whole. The
increments are *compacted* (the whole value written as the new base, the increments deleted,
in the same transaction) when their total size passes ``compact_ratio`` times the base's (at
least ``compact_min_bytes``) or their number ``compact_max_increments``: so a tick costs the
size of its change, plus, amortised, at most ``compact_ratio``-fold more for the compactions,
and a restore reads at most about twice the value's size.

Every value is stored with the wire codec (``blooml.net.codec``): no pickle; a user lattice in
a durable column must be registered with ``blooml.net.register``. A ``state.lock`` file,
locked while a program has the store open, keeps two live programs off one ``data_dir``.
"""

from __future__ import annotations

import os
import sqlite3
import weakref
from pathlib import Path
from typing import Any

from rpds import HashTrieMap

from blooml.engine.relation import _BATCH, MISSING
from blooml.errors import BloomlError, CodecError, DataDirError, DurableStateError
from blooml.errors import SchemaMismatchError as SchemaMismatchError
from blooml.lattices import lmap
from blooml.net._valuecodec import decode, encode, encode_row

try:  # POSIX: an advisory lock that the kernel releases when the process dies
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["DB_NAME", "DurableStore", "close"]

DB_NAME = "state.sqlite3"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, spec TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS info (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS rows (
    coll TEXT NOT NULL, k BLOB NOT NULL, row BLOB NOT NULL, PRIMARY KEY (coll, k)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS lats (name TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS lat_incs (
    name TEXT NOT NULL, seq INTEGER NOT NULL, value BLOB NOT NULL, PRIMARY KEY (name, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS pending (
    seq INTEGER PRIMARY KEY, kind TEXT NOT NULL, name TEXT NOT NULL, item BLOB NOT NULL
);
"""
_KINDS = ("inserts", "deletes", "replaces", "lats")


def _plain(k: Any) -> Any:
    return tuple(k) if isinstance(k, tuple) else k


def _lattice_name(cls: type) -> str:
    return str(getattr(cls, "wrapper_name", "") or f"{cls.__module__}.{cls.__qualname__}")


def _close(conn: sqlite3.Connection, lock: Any) -> None:
    try:
        conn.close()
    finally:
        if lock is not None:
            lock.close()


class DurableStore:
    """The durable state of one program (``rt.durable``), open on its ``data_dir``.

    Made by ``Runtime.open_durable`` when the program declares durable state; restores what
    is stored at once. ``commit(rt)`` is called as the last step of each tick.

    The class attributes tune how lattice variables are written (see the module docstring);
    set them on the class or on one store.
    """

    #: A lattice variable whose stored base is smaller (bytes) is rewritten whole each tick.
    whole_below: int = 4096
    #: Compact when the increments since the base exceed this many times the base's size...
    compact_ratio: float = 1.0
    #: ... and this many bytes,
    compact_min_bytes: int = 64 * 1024
    #: or when there are this many increments.
    compact_max_increments: int = 10_000

    def __init__(self, rt: Any, data_dir: Any) -> None:
        ir = rt.ir
        self.tables = [n for n, c in ir.collections.items() if c.durable]
        self.lattices = [n for n, v in ir.lattices.items() if v.durable]
        names = self.tables + self.lattices
        if data_dir is None:
            raise DataDirError(
                None,
                f"{type(rt.program).__qualname__} declares durable state ({', '.join(names)}) "
                "but no data_dir: pass P(data_dir='some/dir')",
            )
        if not isinstance(data_dir, (str, os.PathLike)) or not str(data_dir):
            raise DataDirError(data_dir, "data_dir must be a directory path (str or Path)")
        path = Path(data_dir)
        if path.exists() and not path.is_dir():
            raise DataDirError(data_dir, "it exists and is not a directory")
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DataDirError(data_dir, f"cannot create it: {exc}") from None
        if not os.access(path, os.W_OK | os.X_OK):
            raise DataDirError(data_dir, "the directory is not writable")
        self.data_dir = data_dir
        self.path = path / DB_NAME
        self._lock = self._take_lock(path)
        try:
            self.conn = sqlite3.connect(
                str(self.path), isolation_level=None, check_same_thread=False
            )
            self.conn.execute("PRAGMA journal_mode=WAL")
            # WAL + NORMAL: a committed transaction survives the process being killed at any
            # moment; only an OS crash or power loss may lose the last ticks (never half of one)
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.executescript(_SCHEMA)
        except sqlite3.Error as exc:
            if self._lock is not None:
                self._lock.close()
            raise DurableStateError(
                data_dir, f"{self.path} is not a usable SQLite database: {exc}"
            ) from None
        self._finalizer = weakref.finalize(self, _close, self.conn, self._lock)
        self.specs = {n: ir.collections[n].describe() for n in self.tables}
        for n in self.lattices:
            self.specs[n] = f"lattice {n}: {_lattice_name(ir.lattices[n].cls)}"
        try:
            self._check_schema()
            self._restore(rt)
        except BaseException:
            self.close()
            raise
        self._had_pending = False

    def _take_lock(self, path: Path) -> Any:
        if fcntl is None:  # pragma: no cover
            return None
        f = open(path / "state.lock", "a+b")  # noqa: SIM115 - held open while in use
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            raise DataDirError(
                self.data_dir if hasattr(self, "data_dir") else str(path),
                "it is in use by another running program (state.lock is held)",
            ) from None
        return f

    def close(self) -> None:
        """Close the database and release the ``data_dir`` (a later program may open it)."""
        self._finalizer()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return not self._finalizer.alive

    # -- opening ----------------------------------------------------------------------------------

    def _check_schema(self) -> None:
        stored = dict(self.conn.execute("SELECT name, spec FROM meta").fetchall())
        for name, spec in sorted(stored.items()):
            want = self.specs.get(name)
            if want is None:
                raise SchemaMismatchError(
                    self.data_dir, name, spec, "no durable state of that name"
                )
            if want != spec:
                raise SchemaMismatchError(self.data_dir, name, spec, want)
        new = [(n, s) for n, s in self.specs.items() if n not in stored]
        if new:
            with self._txn():
                self.conn.executemany("INSERT INTO meta (name, spec) VALUES (?, ?)", new)

    def _decode(self, blob: bytes, what: str) -> Any:
        try:
            return decode(blob)
        except CodecError as exc:
            raise DurableStateError(
                self.data_dir,
                f"the stored {what} cannot be decoded ({exc}); a user lattice must be "
                "registered with blooml.net.register before the program starts",
            ) from None

    def _lattice(self, var: Any, blob: bytes, what: str) -> Any:
        v = self._decode(blob, what)
        if type(v) is not var.cls:
            raise SchemaMismatchError(
                self.data_dir, var.name, type(v).__qualname__, var.cls.__qualname__
            )
        return v

    def _restore(self, rt: Any) -> None:
        conn = self.conn
        row = conn.execute("SELECT value FROM info WHERE key = 'tick_count'").fetchone()
        if row is not None:
            rt.tick_count = int(row[0])
        for name in self.tables:
            rel = rt.rels[name]
            where = f"durable table {name!r} restored from {self.path}"
            blobs = conn.execute("SELECT row FROM rows WHERE coll = ?", (name,)).fetchall()
            if not blobs:
                continue
            rows = [self._decode(b, f"row of {name!r}") for (b,) in blobs]
            rel.begin()
            try:
                rel.add_many(rel.check_rows(rows, where), rt.now, where)
            except BloomlError as exc:
                raise DurableStateError(self.data_dir, f"{where}: {exc}") from None
            rel.commit()
        self._last: dict[str, Any] = {}
        #: per lattice variable: [base bytes, increment bytes, increments, next seq]
        self._incs: dict[str, list[int]] = {}
        for name in self.lattices:
            var = rt.lats[name]
            got = conn.execute("SELECT value FROM lats WHERE name = ?", (name,)).fetchone()
            book = self._incs[name] = [0, 0, 0, 0]
            if got is not None:
                var.value = self._lattice(var, got[0], f"value of {name!r}")
                book[0] = len(got[0])
            for seq, blob in conn.execute(
                "SELECT seq, value FROM lat_incs WHERE name = ? ORDER BY seq", (name,)
            ).fetchall():
                inc = self._lattice(var, blob, f"increment {seq} of {name!r}")
                try:
                    var.value = var.value.merge(inc)
                except Exception as exc:
                    raise DurableStateError(
                        self.data_dir, f"increment {seq} of {name!r} does not merge: {exc}"
                    ) from None
                book[1] += len(blob)
                book[2] += 1
                book[3] = seq + 1
            self._last[name] = var.value
        for kind, name, blob in conn.execute(
            "SELECT kind, name, item FROM pending ORDER BY seq"
        ).fetchall():
            item = self._decode(blob, f"queued fact for {name!r}")
            if kind == "lats":
                rt.pending.add("lats", name, [item])
            else:
                rel = rt.rels[name]
                rt.pending.add(kind, name, [rel.make_row(item, f"queued fact for {name!r}")])

    # -- every tick -------------------------------------------------------------------------------

    def _txn(self) -> Any:
        store = self

        class _T:
            def __enter__(self) -> None:
                store.conn.execute("BEGIN IMMEDIATE")

            def __exit__(self, et: Any, ev: Any, tb: Any) -> None:
                if et is None:
                    store.conn.execute("COMMIT")
                elif store.conn.in_transaction:
                    store.conn.execute("ROLLBACK")

        return _T()

    def commit(self, rt: Any) -> None:
        """Write what this tick changed, in one transaction (raises: the tick rolls back)."""
        self._write(rt, self.prepare(rt))

    def prepare(self, rt: Any) -> tuple[Any, ...]:
        """Encode what this tick would write, without writing (raises as ``commit`` would
        for a value that cannot be stored): the plan ``commit`` writes."""
        if self.closed:
            raise DurableStateError(self.data_dir, "the durable store was closed")
        upserts: list[tuple[str, bytes, bytes]] = []
        deletes: list[tuple[str, bytes]] = []
        for name in self.tables:
            rel = rt.rels[name]
            if not rel.undo:
                continue
            keys: dict[Any, None] = {}
            for k, old in rel.undo:
                if k is _BATCH:
                    keys.update(dict.fromkeys(old))
                else:
                    keys[k] = None
            where = f"durable table {name!r}"
            store = rel.store
            for k in keys:
                kb = encode(_plain(k))
                cur = store.get(k, MISSING)
                if cur is MISSING:
                    deletes.append((name, kb))
                else:
                    upserts.append((name, kb, encode_row(tuple(cur), where, rel.columns)))
        lats: list[tuple[str, bytes]] = []  # whole values (new bases)
        incs: list[tuple[str, int, bytes]] = []
        for name in self.lattices:
            var = rt.lats[name]
            v = var.value
            if v is self._last[name]:
                continue
            base, inc_bytes, n_incs, seq = self._incs[name]
            if base >= self.whole_below:
                inc = _increment(var, self._last[name])
                if inc is not None:
                    blob = encode(inc)
                    total = inc_bytes + len(blob)
                    limit = max(self.compact_ratio * base, self.compact_min_bytes)
                    if total <= limit and n_incs < self.compact_max_increments:
                        incs.append((name, seq, blob))
                        continue
            lats.append((name, encode(v)))  # small, or time to compact
        pend: list[tuple[str, str, bytes]] = []
        p = rt.pending
        for kind in _KINDS:
            d = getattr(p, kind)
            for name in self.lattices if kind == "lats" else self.tables:
                for item in d.get(name, ()):
                    pend.append((kind, name, encode(_plain(item))))
        return deletes, upserts, lats, incs, pend

    def _write(self, rt: Any, plan: tuple[Any, ...]) -> None:
        deletes, upserts, lats, incs, pend = plan
        try:
            with self._txn():
                c = self.conn
                if deletes:
                    c.executemany("DELETE FROM rows WHERE coll = ? AND k = ?", deletes)
                if upserts:
                    c.executemany(
                        "INSERT INTO rows (coll, k, row) VALUES (?, ?, ?) "
                        "ON CONFLICT (coll, k) DO UPDATE SET row = excluded.row",
                        upserts,
                    )
                if lats:
                    c.executemany(
                        "INSERT INTO lats (name, value) VALUES (?, ?) "
                        "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                        lats,
                    )
                    c.executemany("DELETE FROM lat_incs WHERE name = ?", [(n,) for n, _ in lats])
                if incs:
                    c.executemany("INSERT INTO lat_incs (name, seq, value) VALUES (?, ?, ?)", incs)
                if self._had_pending or pend:
                    c.execute("DELETE FROM pending")
                    c.executemany("INSERT INTO pending (kind, name, item) VALUES (?, ?, ?)", pend)
                c.execute(
                    "INSERT INTO info (key, value) VALUES ('tick_count', ?) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (rt.tick_count + 1,),
                )
        except sqlite3.Error as exc:
            raise DurableStateError(self.data_dir, f"writing tick {rt.tick_count}: {exc}") from None
        self._had_pending = bool(pend)
        for name, blob in lats:
            self._last[name] = rt.lats[name].value
            self._incs[name] = [len(blob), 0, 0, 0]
        for name, seq, blob in incs:
            self._last[name] = rt.lats[name].value
            book = self._incs[name]
            book[1] += len(blob)
            book[2] += 1
            book[3] = seq + 1

    def __repr__(self) -> str:
        return f"<DurableStore {self.path} {'closed' if self.closed else 'open'}>"


def _increment(var: Any, before: Any) -> Any:
    """What the tick added to lattice variable ``var`` (whose value was ``before``): the join
    of the values merged into it this tick (``LatVarState.incs``), for an ``lmap`` only the
    keys whose value changed; ``None`` when that is not known (then the whole is written)."""
    got = var.incs
    if not got:
        return None
    inc = got[0]
    for x in got[1:]:
        inc = inc.merge(x)
    now = var.value
    if type(inc) is lmap and type(now) is lmap and type(before) is lmap:
        get_now, get_old = now._v.get, before._v.get
        changed = {}
        for bk, _ in inc._v.items():  # keys boxed (and frozen) alike in all three
            v = get_now(bk)
            old = get_old(bk)
            if v is not old and v != old:
                changed[bk] = v
        if len(changed) != len(inc._v):
            inc = lmap._make(HashTrieMap(changed))
    return inc


def close(program: Any) -> None:
    """Close ``program``'s durable store and release its ``data_dir``, so that another
    program (a restarted one) may open it; the program's next tick fails with
    ``DurableStateError``. Nothing happens for a program without durable state."""
    store = getattr(getattr(program, "_rt", None), "durable", None)
    if store is not None:
        store.close()
