"""A replicated shopping cart made of CRDTs, and the confluence checker on three carts.

Run it with ``python examples/crdt_cart.py``.

``CrdtCart`` keeps a cart as an ``lmap`` from item to ``lpncounter``: an action (add or remove
a quantity) is an increment or a decrement under its own request id, so actions commute,
and a duplicate is absorbed by the merge. Shoppers send each action to one of two replicas;
the replicas gossip their whole cart on a ``periodic`` timer (an ``lmap`` in a channel column)
and merge what they receive. Whatever order actions and gossip arrive in, both replicas end
with the same cart.

``blooml.testing.check_confluence`` checks exactly that, under many message schedules chosen
by hypothesis: it passes on ``CrdtCart``, and on the disorderly cart of
``examples/shopping_cart.py`` (whose checkout waits for a seal), and it catches the destructive
cart, printing the two schedules, the two outcomes and the points of order.

``main()`` returns what it printed, for the test suite.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from blooml import Program, bloom, channel, interface, lmap, lpncounter, periodic, table
from blooml.errors import ConfluenceViolation
from blooml.testing import check_confluence

sys.path.insert(0, str(Path(__file__).resolve().parent))
import shopping_cart


def counter(reqid: str, qty: int) -> lpncounter:
    """One action as a counter: ``qty`` up (or down) under the action's own id."""
    return lpncounter({reqid: qty}) if qty >= 0 else lpncounter(None, {reqid: -qty})


class CrdtCart(Program):
    """A cart replica: ``cart`` maps item -> ``lpncounter``; replicas gossip it."""

    action = channel(["@replica", "reqid"], ["item", "qty"])
    peer = table(["addr"])
    sync = channel(["@addr"], ["cart"])
    gossip = periodic(0.5)
    cart = lmap()

    # fmt: off
    @bloom
    def rules(self) -> None:
        self.cart <= self.action.map(lambda a: (a.item, counter(a.reqid, a.qty)))
        self.sync <~ self.gossip.join(self.peer).map(lambda t, p: (p.addr, self.cart))
        self.cart <= self.sync.map(lambda s: s.cart)
    # fmt: on


class Shopper(Program):
    """Sends each action to the replica it names."""

    do = interface(["replica", "reqid"], ["item", "qty"])
    action = channel(["@replica", "reqid"], ["item", "qty"])

    # fmt: off
    @bloom
    def rules(self) -> None:
        self.action <~ self.do
    # fmt: on


def contents(cart: lmap) -> dict[str, int]:
    """The cart as ``{item: quantity}`` (items whose count is above zero)."""
    out = {item: cart.at(item, lpncounter).value() for item in cart.reveal()}
    return {k: v for k, v in sorted(out.items()) if v > 0}


def crdt_nodes(sim: Any) -> list[Program]:
    """Two replicas and a shopper on ``sim``."""
    reps = [CrdtCart(addr=a, network=sim) for a in ("r1", "r2")]
    reps[0].peer.insert([("r2",)])
    reps[1].peer.insert([("r1",)])
    return [*reps, Shopper(addr="shopper", network=sim)]


ACTIONS = shopping_cart.SESSION_ACTIONS


def crdt_inputs() -> list[tuple[float, str, str, list[Any]]]:
    """The session's actions, 10 ms apart, alternating between the replicas."""
    return [
        (0.01 * i, "shopper", "do", [(f"r{1 + i % 2}", reqid, item, qty)])
        for i, (reqid, item, qty) in enumerate(ACTIONS)
    ]


def cart_nodes(server_cls: type) -> Any:
    """A factory for a client and a ``server_cls`` cart server (``shopping_cart.py``)."""

    def make(sim: Any) -> list[Program]:
        return [
            shopping_cart.CartClient(addr="client", network=sim),
            server_cls(addr="server", network=sim),
        ]

    return make


def cart_inputs() -> list[tuple[float, str, str, list[Any]]]:
    """The checkout first (it announces how many actions to wait for), then the actions."""
    n = len(ACTIONS)
    out: list[tuple[float, str, str, list[Any]]] = [
        (0.0, "client", "client_checkout", [("server", "client", "s1", n)])
    ]
    for i, (reqid, item, qty) in enumerate(ACTIONS):
        row = ("server", "client", "s1", reqid, item, qty)
        out.append((0.01 * i, "client", "client_action", [row]))
    return out


def main(runs: int = 60) -> dict[str, Any]:
    """Check the three carts; print and return what was found."""
    out: dict[str, Any] = {}
    print("The same five cart actions under many message schedules (check_confluence):\n")
    crdt = check_confluence(
        crdt_nodes, crdt_inputs(), outputs=["cart"], runs=runs, seed=1, until=3.0
    )
    carts = {a: contents(o["cart"]) for a, o in crdt.outcome.items()}
    out["crdt"] = {"runs": crdt.runs, "carts": carts, "points": crdt.points_of_order}
    print(f"CrdtCart: {crdt}")
    want = dict(shopping_cart.expected_cart(ACTIONS))
    print(f"  both replicas end with {carts['r1']} (expected {want})\n")
    dis = check_confluence(
        cart_nodes(shopping_cart.DisorderlyCart),
        cart_inputs(),
        outputs={"client": ["response"]},
        runs=runs,
    )
    out["disorderly"] = {"runs": dis.runs, "response": dis.outcome["client"]["response"]}
    print(f"DisorderlyCart: {dis}\n")
    try:
        check_confluence(
            cart_nodes(shopping_cart.DestructiveCart),
            cart_inputs(),
            outputs={"client": ["response"]},
            runs=runs,
        )
    except ConfluenceViolation as exc:
        print(f"DestructiveCart: {exc}")
        ref, bad = exc.outcomes
        out["destructive"] = {
            "reference": ref["client"]["response"],
            "failing": bad["client"]["response"],
            "failing_schedule": exc.schedules[1],
        }
    else:
        print("DestructiveCart: no difference found (try more runs)")
        out["destructive"] = None
    return out


if __name__ == "__main__":
    main()
