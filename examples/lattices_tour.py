"""A tour of blooml's lattices: values that only grow, merged in any order, by any replica.

Run it with ``python examples/lattices_tour.py``. Every section prints what it shows; the
script's ``main()`` returns the values it printed, so the test suite checks them too.
"""

from __future__ import annotations

import pickle
import random
from typing import Any

from blooml import kind_of, lbag, lmap, lmax, lmin, lpset, lset


def section(title: str) -> None:
    print(f"\n== {title}")


def main() -> dict[str, Any]:
    out: dict[str, Any] = {}

    section("Merge is a least upper bound: order and grouping do not matter")
    updates = [lmax(3), lmax(11), lmax(7), lmax(5)]
    shuffled = updates[:]
    random.Random(1).shuffle(shuffled)
    a = lmax.fold(updates)
    b = lmax.fold(shuffled)
    print(f"fold {updates} -> {a}; shuffled -> {b}; ⊥ is {lmax()}")
    out["max"] = a

    section("lmin: growing means getting smaller (shortest distances)")
    dist = lmin(12) | lmin(9) | lmin()
    print(f"lmin(12) | lmin(9) | lmin() = {dist};  lmin(12) <= lmin(9): {lmin(12) <= lmin(9)}")
    print(f"a morphism: (dist + 3).lt(13) = {(dist + 3).lt(13)}")
    out["dist"] = dist

    section("Thresholds with lbool: once true, stays true")
    votes = lset({"alice", "bob"}) | lset({"bob", "carol"})
    quorum = votes.size().gt_eq(3)
    print(f"votes = {votes}; size() = {votes.size()}; size().gt_eq(3) = {quorum}")
    print("when_true:", quorum.when_true(lambda: "quorum reached"))
    out["quorum"] = quorum

    section("Sets, bags and non-negative sets")
    s = lset({1, 2, 3})
    print(f"{s}.intersect(lset({{2, 3, 4}})) = {s.intersect(lset({2, 3, 4}))}")
    print(f"{s}.contains(2) = {s.contains(2)}; project(x * 10) = {s.project(lambda x: x * 10)}")
    bag = lbag(["x", "x", "y"]) | lbag({"x": 1, "y": 3})
    print(f"lbag merge keeps the max multiplicity: {bag}; mult('y') = {bag.mult('y')}")
    payments = lpset({10, 25}) | lpset({25, 40})
    print(f"lpset {payments}: sum() = {payments.sum()} (monotone: it only grows)")
    out["sum"] = payments.sum()

    section("Maps of lattices merge key by key")
    replica_a = lmap({"apples": lmax(3), "pears": lmax(1)})
    replica_b = lmap({"apples": lmax(2), "plums": lmax(8)})
    merged = replica_a | replica_b
    print(f"{replica_a}\n  | {replica_b}\n  = {merged}")
    print(f"at('apples') = {merged.at('apples')}; at('kiwis', lmax) = {merged.at('kiwis', lmax)}")
    print(f"key_set() = {merged.key_set()}; has_key('plums') = {merged.has_key('plums')}")
    out["map"] = merged

    section("Method kinds drive evaluation (and the law checker verifies them)")
    for cls, name in [(lset, "contains"), (lset, "size"), (lset, "reveal"), (lmax, "gt")]:
        print(f"  {cls.__name__}.{name:<9} {kind_of(cls, name)}")

    section("Structural sharing: merging a small delta into a large value")
    big = lset(range(100_000))
    same = big.merge(lset({5, 6}))
    grown = big.merge(lset({-1}))
    print(f"big ⊔ (subset) is big: {same is big};  big ⊔ {{-1}} has {len(grown.reveal())} elements")
    out["shared"] = same is big

    section("Values are immutable, hashable, and pickle (Spark ships them between its workers)")
    blob = pickle.dumps(merged)
    print(f"pickled lmap: {len(blob)} bytes; round trip equal: {pickle.loads(blob) == merged}")
    print(f"repr round-trips through eval: {eval(repr(merged)) == merged}")
    return out


if __name__ == "__main__":
    main()
