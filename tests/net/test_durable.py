"""Durable state: declaration, restore on restart, one transaction per tick, clear errors."""

from __future__ import annotations

import gc
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from blooml import Program, bloom, durable, interface, lmap, lmax, lset, scratch, table
from blooml.errors import (
    CodecError,
    DataDirError,
    DurableStateError,
    SchemaMismatchError,
)
from blooml.net.codec import encode
from blooml.net.durable import DB_NAME, DurableStore, close


class Store(Program):
    put = interface(["k"], ["v"])
    drop = interface(["k"])
    kv = table(["k"], ["v"], durable=True)
    seen = durable(lset())
    best = durable(lmax(0))
    scratchpad = table(["k"])  # not durable

    # fmt: off
    @bloom
    def rules(self):
        self.kv <+- self.put
        self.kv <- self.kv.join(self.drop, self.kv.k == self.drop.k).map(lambda r, d: r)
        self.seen <= self.put.map(lambda p: p.k)
        self.best <= self.put.map(lambda p: lmax(p.v))
        self.scratchpad <= self.put.map(lambda p: (p.k,))
    # fmt: on


def reopen(p: Any, cls: type = Store, **kw: Any) -> Any:
    d = p._rt.data_dir
    p._rt.durable.close()
    del p
    gc.collect()
    return cls(data_dir=d, **kw)


def test_state_and_tick_count_survive_a_restart(tmp_path: Path) -> None:
    p = Store(data_dir=str(tmp_path / "s"))
    p.put.insert([("a", 1), ("b", 7)])
    p.tick()  # kv gets its rows at the next tick (<+-): queued facts are durable too
    p.put.insert([("a", 3)])
    p.drop.insert([("b",)])
    p.tick(2)
    assert sorted(tuple(r) for r in p.kv) == [("a", 3)]
    q = reopen(p)
    assert q.tick_count == 3
    assert sorted(tuple(r) for r in q.kv) == [("a", 3)]
    assert q.seen.value.reveal() == frozenset({"a", "b"})
    assert q.best.value.reveal() == 7
    assert list(q.scratchpad) == []  # only durable state is kept
    q.put.insert([("c", 9)])
    q.tick(2)
    r = reopen(q)
    assert sorted(tuple(x) for x in r.kv) == [("a", 3), ("c", 9)]
    assert r.best.value.reveal() == 9


def test_one_transaction_per_tick_in_wal_mode(tmp_path: Path) -> None:
    p = Store(data_dir=tmp_path)
    p.put.insert([("a", 1)])
    p.tick(2)
    con = sqlite3.connect(tmp_path / DB_NAME)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert con.execute("SELECT value FROM info WHERE key='tick_count'").fetchone()[0] == 2
    assert con.execute("SELECT count(*) FROM rows").fetchone()[0] == 1
    con.close()


class Opaque:
    pass


class Bad(Program):
    go = interface(["k"])
    t = table(["k"], ["v"], durable=True)

    # fmt: off
    @bloom
    def rules(self):
        self.t <= self.go.map(lambda g: (g.k, Opaque()))
    # fmt: on


def test_a_value_the_codec_refuses_rolls_the_tick_back(tmp_path: Path) -> None:
    p = Bad(data_dir=tmp_path)
    p.go.insert([("x",)])
    with pytest.raises(CodecError, match="durable table 't'"):
        p.tick()
    assert p.tick_count == 0 and list(p.t) == []
    con = sqlite3.connect(tmp_path / DB_NAME)
    assert con.execute("SELECT count(*) FROM rows").fetchone()[0] == 0
    con.close()


def test_data_dir_errors(tmp_path: Path) -> None:
    with pytest.raises(DataDirError, match="no data_dir"):
        Store()
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(DataDirError, match="not a directory") as ei:
        Store(data_dir=str(f))
    assert ei.value.data_dir == str(f)
    with pytest.raises(DataDirError, match="directory path"):
        Store(data_dir=42)  # type: ignore[arg-type]
    p = Store(data_dir=tmp_path / "d")
    with pytest.raises(DataDirError, match="in use by another running program"):
        Store(data_dir=tmp_path / "d")
    p._rt.durable.close()
    Store(data_dir=tmp_path / "d")  # released
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / DB_NAME).write_bytes(b"not a database at all" * 100)
    with pytest.raises(DurableStateError, match="not a usable SQLite database"):
        Store(data_dir=tmp_path / "junk")


def test_data_dir_without_durable_state_is_only_recorded(tmp_path: Path) -> None:
    class Plain(Program):
        t = table(["k"])

    p = Plain(data_dir=str(tmp_path / "never"))
    assert p._rt.durable is None
    assert not (tmp_path / "never").exists()


class StoreV2(Program):
    """Store with a changed column list."""

    put = interface(["k"], ["v"])
    kv = table(["k"], ["v", "when"], durable=True)
    seen = durable(lset())
    best = durable(lmax(0))


class StoreFewer(Program):
    kv = table(["k"], ["v"], durable=True)


class StoreMore(Store):
    extra = table(["x"], durable=True)


def test_schema_mismatch(tmp_path: Path) -> None:
    p = Store(data_dir=tmp_path)
    p.put.insert([("a", 1)])
    p.tick(2)
    p._rt.durable.close()
    with pytest.raises(SchemaMismatchError) as ei:
        StoreV2(data_dir=tmp_path)
    e = ei.value
    assert e.name == "kv"
    assert "[k] -> [v]" in e.stored and "[v, when]" in e.declared
    assert "use a new data_dir" in str(e)
    with pytest.raises(SchemaMismatchError, match="'best' was stored as"):
        StoreFewer(data_dir=tmp_path)
    q = StoreMore(data_dir=tmp_path)  # a new durable table is fine
    assert sorted(tuple(r) for r in q.kv) == [("a", 1)]


def test_declarations() -> None:
    assert table(["k"], durable=True).durable
    assert durable(table(["k"], ["v"])).durable
    d = durable(lmax(3))
    assert durable(d) is d
    with pytest.raises(DurableStateError, match="only tables and lattice variables"):
        durable(scratch(["k"]))
    with pytest.raises(DurableStateError, match="both durable and soft state"):
        table(["k"], ttl=1.0, durable=True)
    with pytest.raises(DurableStateError, match="takes a table"):
        durable(42)
    with pytest.raises(DurableStateError, match="True or False"):
        table(["k"], durable="yes")  # type: ignore[arg-type]
    ir = Store.ir()
    assert ir.collections["kv"].durable and not ir.collections["scratchpad"].durable
    assert ir.lattices["best"].durable and ir.lattices["best"].initial == lmax(0)
    assert "durable" in ir.collections["kv"].describe()
    assert "durable" in ir.lattices["seen"].describe()


def test_a_durable_node_on_its_own_thread_restarts(tmp_path: Path) -> None:
    """A started node writes from its own thread; stop, close, start again: state is back."""
    from blooml.net.durable import close

    p = Store(addr="127.0.0.1:0", data_dir=tmp_path)
    p.start()
    try:
        p.sync_do(lambda q: q.put.insert([("a", 4)]))
        p.sync_do(lambda q: None)  # one more tick applies the <+- facts
    finally:
        p.stop()
    close(p)
    q = Store(addr="127.0.0.1:0", data_dir=tmp_path)
    assert sorted(tuple(r) for r in q.kv) == [("a", 4)]
    assert q.best.value.reveal() == 4
    close(q)
    q.put.insert([("b", 1)])
    with pytest.raises(DurableStateError, match="closed"):
        q.tick()
    assert q.tick_count >= 2 and list(q.put) == []


def test_a_corrupted_stored_row_is_a_clear_error(tmp_path: Path) -> None:
    from blooml.net.durable import close

    p = Store(data_dir=tmp_path)
    p.put.insert([("a", 1)])
    p.tick(2)
    close(p)
    con = sqlite3.connect(tmp_path / DB_NAME)
    con.execute("UPDATE rows SET row = ?", (b"\xc1\xc1garbage",))
    con.commit()
    con.close()
    with pytest.raises(DurableStateError, match="cannot be decoded"):
        Store(data_dir=tmp_path)
    # the failed open released the data_dir: after a repair it opens
    con = sqlite3.connect(tmp_path / DB_NAME)
    con.execute("DELETE FROM rows")
    con.commit()
    con.close()
    assert list(Store(data_dir=tmp_path).kv) == []


class KeySplitChanged(Program):
    """``kv`` with the same columns, both in the key."""

    kv = table(["k", "v"], durable=True)
    seen = durable(lset())
    best = durable(lmax(0))


class BestIsAnLset(Program):
    kv = table(["k"], ["v"], durable=True)
    seen = durable(lset())
    best = durable(lset())


def test_a_changed_key_split_or_lattice_class_is_a_schema_mismatch(tmp_path: Path) -> None:
    from blooml.net.durable import close

    close(Store(data_dir=tmp_path))
    with pytest.raises(SchemaMismatchError, match="'kv'"):
        KeySplitChanged(data_dir=tmp_path)
    with pytest.raises(SchemaMismatchError, match=r"'best'.*lmax.*lset"):
        BestIsAnLset(data_dir=tmp_path)


class Big(Program):
    """A durable ``lmap`` and ``lset`` that grow by a few items per tick."""

    put = interface(["k"], ["v"])
    store = durable(lmap())
    keys = durable(lset())

    # fmt: off
    @bloom
    def rules(self):
        self.store <= self.put.map(lambda p: (p.k, lmax(p.v)))
        self.keys <= self.put.map(lambda p: p.k)
    # fmt: on


def _incs(d: Path) -> list[tuple[str, int]]:
    with sqlite3.connect(d / DB_NAME) as c:
        return c.execute("SELECT name, length(value) FROM lat_incs ORDER BY name, seq").fetchall()


def test_a_durable_lattice_writes_its_increment_not_its_value(tmp_path: Path) -> None:
    p = Big(data_dir=tmp_path)
    p.put.insert([(k, 0) for k in range(2_000)])
    p.tick()  # the first value is written whole (the base)
    assert _incs(tmp_path) == []
    p.put.insert([(7, 5), (5_000, 1)])  # one key changes, one is new
    p.tick()
    p.put.insert([(7, 3)])  # below what is held: the store does not change
    p.tick()
    p.put.insert([(7, 9)])
    p.tick()
    incs = _incs(tmp_path)
    assert [n for n, _ in incs] == ["keys", "store", "store"]
    assert all(size < 60 for _, size in incs), incs  # a key or two, not 2,000
    want_store, want_keys = p.store.value, p.keys.value
    close(p)
    q = Big(data_dir=tmp_path)
    assert q.store.value == want_store and q.keys.value == want_keys
    assert q.store.value.at(7) == lmax(9) and q.tick_count == 4
    close(q)


def test_increments_are_compacted_into_the_base(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(DurableStore, "whole_below", 0)
    monkeypatch.setattr(DurableStore, "compact_min_bytes", 0)
    monkeypatch.setattr(DurableStore, "compact_max_increments", 5)
    p = Big(data_dir=tmp_path)
    for t in range(23):
        p.put.insert([(t, t)])
        p.tick()
        assert len([n for n, _ in _incs(tmp_path) if n == "store"]) <= 5
    want = p.store.value
    close(p)
    q = Big(data_dir=tmp_path)
    assert q.store.value == want and len(want) == 23
    close(q)


def test_a_restore_refuses_an_increment_of_another_class(tmp_path: Path) -> None:
    p = Big(data_dir=tmp_path)
    p.tick()
    close(p)
    with sqlite3.connect(tmp_path / DB_NAME) as c:
        c.execute("INSERT INTO lat_incs VALUES ('store', 0, ?)", (encode(lset([1])),))
    with pytest.raises(SchemaMismatchError, match="store"):
        Big(data_dir=tmp_path)
