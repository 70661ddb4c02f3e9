"""Key-value stores: a lattice one (``lmap``) that replicates by merging, and Bud's table one.

Run it with ``python examples/kvs.py``.

* ``KVS`` keeps the whole store in one lattice variable, an ``lmap`` from key to
  ``lmax((version, value))``: a put merges into it, so a put with an older version loses to the
  newer one whatever order they arrive in. Gets read the store inside a rule function
  (``self.store.at(key, lmax)``), and answer with an ``lmax`` that grows with the store.
* ``ReplicatedKVS`` adds anti-entropy: on a periodic timer each replica sends its whole
  ``lmap`` to its peers over a channel (a lattice embedded in a tuple), and the receiver merges
  it in. Replicas that saw different puts converge to the same store.
* ``TableKVS`` is Bud's basic KVS: one row per key, overwritten by ``<-`` plus ``<+`` (the
  delete and the insert both take effect at the start of the next tick). Two puts to one key in
  one tick are a key conflict: a destructive store needs its writers ordered.
  ``ReplaceKVS`` says the same with one ``<+-`` (replace) rule.

``main()`` returns what it printed, for the test suite.
"""

from __future__ import annotations

from typing import Any

from blooml import (
    LocalNetwork,
    Program,
    bloom,
    channel,
    interface,
    lmap,
    lmax,
    periodic,
    table,
)


class KVS(Program):
    """A versioned store: ``store`` maps each key to ``lmax((version, value))``."""

    kvput = interface(["reqid"], ["key", "version", "value"])
    kvget = interface(["reqid"], ["key"])
    store = lmap()
    kvget_response = table(["reqid"], ["key", "value"])  # value: lmax((version, value))

    # fmt: off
    @bloom
    def put(self) -> None:
        self.store <= self.kvput.map(lambda p: (p.key, lmax((p.version, p.value))))

    @bloom
    def get(self) -> None:
        self.kvget_response <= self.kvget.map(
            lambda g: (g.reqid, g.key, self.store.at(g.key, lmax))
        )
    # fmt: on


class ReplicatedKVS(KVS):
    """A ``KVS`` replica that gossips its whole store to every ``peer`` each ``gossip`` period."""

    peer = table(["addr"])
    sync = channel(["@addr"], ["kv"])
    gossip = periodic(1.0)

    # fmt: off
    @bloom
    def anti_entropy(self) -> None:
        self.sync <~ self.gossip.join(self.peer).map(lambda t, p: (p.addr, self.store))
        self.store <= self.sync.map(lambda s: s.kv)
    # fmt: on


class TableKVS(Program):
    """Bud's basic KVS: one row per key, replaced by a delete and an insert at the next tick."""

    kvput = interface(["reqid"], ["key", "value"])
    kvget = interface(["reqid"], ["key"])
    kvstate = table(["key"], ["value"])
    kvget_response = table(["reqid"], ["key", "value"])

    # fmt: off
    @bloom
    def mutate(self) -> None:
        self.kvstate <+ self.kvput.map(lambda p: (p.key, p.value))
        self.kvstate <- self.kvstate.join(self.kvput, self.kvstate.key == self.kvput.key).map(
            lambda s, p: s
        )

    @bloom
    def get(self) -> None:
        self.kvget_response <= self.kvget.join(
            self.kvstate, self.kvget.key == self.kvstate.key
        ).map(lambda g, s: (g.reqid, s.key, s.value))
    # fmt: on


class ReplaceKVS(TableKVS):
    """``TableKVS`` with its ``mutate`` block redefined by one replace rule: ``<+-`` deletes the
    key's old row and inserts the new one at the next tick."""

    # fmt: off
    @bloom
    def mutate(self) -> None:
        self.kvstate <+- self.kvput.map(lambda p: (p.key, p.value))
    # fmt: on


def value_of(v: lmax) -> Any:
    """The plain value inside an ``lmax((version, value))`` (``None`` for a missing key)."""
    raw = v.reveal()
    return None if raw is None else raw[1]


def store_dict(p: KVS) -> dict[str, Any]:
    """The store as ``{key: value}`` (the newest version of each key), sorted by key."""
    store = p.store.value
    return {k: value_of(store.at(k, lmax)) for k in sorted(store.reveal())}


class FakeClock:
    """A clock the demo advances by hand (seconds)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def main() -> dict[str, Any]:
    """Versioned puts, gets, two replicas converging, and the table store's overwrite."""
    out: dict[str, Any] = {}
    print("1. KVS: the store is an lmap of lmax((version, value)); puts merge.\n")
    kv = KVS()
    kv.kvput.insert([(1, "colour", 2, "green"), (2, "size", 1, "M")])
    kv.tick()
    kv.kvput.insert([(3, "colour", 1, "red")])  # an older version arriving late
    kv.kvget.insert([(10, "colour"), (11, "size"), (12, "shape")])
    kv.tick()
    for r in sorted(kv.kvget_response, key=lambda r: r.reqid):
        print(f"  get #{r.reqid} {r.key!r:<8} -> {value_of(r.value)!r:<8} ({r.value})")
    print("  the late put of version 1 ('red') did not overwrite version 2 ('green')")
    out["gets"] = {r.reqid: value_of(r.value) for r in kv.kvget_response}

    print("\n2. ReplicatedKVS: two replicas take different puts, then gossip every second.\n")
    clock = FakeClock()
    net = LocalNetwork()
    east = ReplicatedKVS(addr="east", clock=clock, network=net)
    west = ReplicatedKVS(addr="west", clock=clock, network=net)
    east.peer.insert([("west",)])
    west.peer.insert([("east",)])
    east.kvput.insert([(1, "colour", 3, "blue"), (2, "size", 1, "S")])
    west.kvput.insert([(1, "colour", 2, "green"), (2, "shape", 1, "round")])
    for _ in range(6):
        clock.now += 0.5
        net.tick()
        print(f"  t={clock.now:<3g} east {store_dict(east)}\n         west {store_dict(west)}")
        if store_dict(east) == store_dict(west) and len(store_dict(east)) == 3:
            break
    print("  converged: the newest version of every key, on both replicas")
    out["east"], out["west"] = store_dict(east), store_dict(west)

    print("\n3. TableKVS (Bud's destructive store): <- and <+ replace the row at the next tick.\n")
    t = TableKVS()
    t.kvput.insert([(1, "colour", "green")])
    t.tick()
    t.kvput.insert([(2, "colour", "red")])
    t.tick()
    print(f"  after the put tick: {sorted(tuple(r) for r in t.kvstate)} (the put is next-tick)")
    t.tick()
    t.kvget.insert([(3, "colour")])
    t.tick()
    print(f"  one tick later:     {sorted(tuple(r) for r in t.kvstate)}")
    print(f"  get #3 -> {[r.value for r in t.kvget_response]}")
    out["table"] = {r.key: r.value for r in t.kvstate}
    r = ReplaceKVS()
    r.kvput.insert([(1, "colour", "green")])
    r.tick()
    r.kvput.insert([(2, "colour", "red")])
    r.tick(2)
    print(f"  ReplaceKVS (one <+- rule) after the same puts: {sorted(tuple(x) for x in r.kvstate)}")
    out["replace"] = {x.key: x.value for x in r.kvstate}
    return out


if __name__ == "__main__":
    main()
