"""The shopping cart, disorderly and destructive (the Bud paper's consistency case study).

Run it with ``python examples/shopping_cart.py``. A client sends cart actions (add or remove a
quantity of an item) and finally a checkout that says how many actions the session made. Two
servers implement the same ``CartProtocol``:

* ``DisorderlyCart`` logs every action in a table that only grows, and at checkout sums the
  signed quantities per item. Only the checkout is non-monotone (a ``group``), and it waits until
  all announced actions are in, so the answer is the same whatever order messages arrive in.
* ``DestructiveCart`` keeps one row per (session, item) and overwrites it for every action, in
  arrival order, one action per session per tick (a Dedalus queue). A count cannot go below
  zero, so a removal that overtakes its addition is lost: the answer depends on message order.

Both run here on a ``LocalNetwork`` (client and server in one process); the same classes mixed
into one program also run over the loopback channel (``LoopbackDisorderlyCart``).
``main()`` returns what it printed, for the test suite.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from blooml import (
    LocalNetwork,
    Program,
    accum,
    bloom,
    channel,
    count,
    interface,
    scratch,
    sum_,
    table,
)

Action = tuple[str, str, int]  # (reqid, item, signed quantity: + add, - remove)


class CartProtocol(Program):
    """The messages between a cart client and a cart server."""

    action_msg = channel(["@server", "client", "session", "reqid"], ["item", "qty"])
    checkout_msg = channel(["@server", "client", "session"], ["n_actions"])
    response_msg = channel(["@client", "session"], ["items"])


class CartClient(CartProtocol):
    """Forwards the user's actions and checkout to the server; keeps the server's answers."""

    client_action = interface(["server", "client", "session", "reqid"], ["item", "qty"])
    client_checkout = interface(["server", "client", "session"], ["n_actions"])
    response = table(["session"], ["items"])

    # fmt: off
    @bloom
    def client(self) -> None:
        self.action_msg <~ self.client_action
        self.checkout_msg <~ self.client_checkout
        self.response <= self.response_msg.map(lambda r: (r.session, r.items))
    # fmt: on


class CartServer(CartProtocol):
    """What both servers share: wait for all announced actions, then answer from ``final``.

    A concrete server fills ``done(session, n)`` (how many of the session's actions it has
    applied) and ``final(session, item, n)`` (the cart contents); this module turns them into
    one response per checkout.
    """

    checkout_log = table(["session"], ["client", "n_actions"])
    done = scratch(["session"], ["n"])
    final = scratch(["session", "item"], ["n"])
    ready = scratch(["session"], ["client"])
    line = scratch(["session", "entry"])  # entry: an (item, n) pair
    contents = scratch(["session"], ["lines"])

    # fmt: off
    @bloom
    def checkout(self) -> None:
        self.checkout_log <= self.checkout_msg.map(lambda c: (c.session, c.client, c.n_actions))
        self.ready <= self.checkout_log.join(
            self.done,
            self.checkout_log.session == self.done.session,
            self.checkout_log.n_actions == self.done.n,
        ).map(lambda c, d: (c.session, c.client))
        # sessions whose checkout announced zero actions have no `done` row at all
        self.ready <= self.checkout_log.filter(lambda c: c.n_actions == 0).map(
            lambda c: (c.session, c.client)
        )
        self.line <= self.final.filter(lambda f: f.n > 0).map(lambda f: (f.session, (f.item, f.n)))
        self.contents <= self.line.group(["session"], accum("entry"))
        self.response_msg <~ self.ready.join(
            self.contents, self.ready.session == self.contents.session
        ).map(lambda r, c: (r.client, r.session, tuple(sorted(c.lines))))
        self.response_msg <~ self.ready.notin(
            self.contents, self.ready.session == self.contents.session
        ).map(lambda r: (r.client, r.session, ()))
        self.checkout_log <- self.ready.join(
            self.checkout_log, self.ready.session == self.checkout_log.session
        ).map(lambda r, c: c)
    # fmt: on


class DisorderlyCart(CartServer):
    """Log every action (monotone); sum per item only at checkout."""

    action_log = table(["session", "reqid"], ["item", "qty"])

    # fmt: off
    @bloom
    def on_action(self) -> None:
        self.action_log <= self.action_msg.map(lambda a: (a.session, a.reqid, a.item, a.qty))

    @bloom
    def tally(self) -> None:
        self.done <= self.action_log.group(["session"], count())
        self.final <= self.action_log.group(["session", "item"], sum_("qty"))
    # fmt: on


class DestructiveCart(CartServer):
    """Overwrite one row per (session, item) per action, in arrival order, never below zero."""

    queue = table(["session", "order"], ["reqid", "item", "qty"])
    step = scratch(["session"], ["order", "reqid", "item", "qty"])
    state = table(["session", "item"], ["n"])
    applied = table(["session", "reqid"])

    # fmt: off
    @bloom
    def on_action(self) -> None:
        # arrival order: the tick it arrived in, then the request id (ties within one tick)
        self.queue <= self.action_msg.map(
            lambda a: (a.session, (self.tick_count, a.reqid), a.reqid, a.item, a.qty)
        )

    @bloom
    def apply_one(self) -> None:
        self.step <= self.queue.argmin(["session"], "order")
        self.queue <- self.step.map(lambda s: (s.session, s.order, s.reqid, s.item, s.qty))
        self.applied <+ self.step.map(lambda s: (s.session, s.reqid))
        # read-modify-write: replace the old count (or start from zero) with a clamped new one
        changed = self.step.join(
            self.state, self.step.session == self.state.session, self.step.item == self.state.item
        )
        self.state <- changed.map(lambda s, old: old)
        self.state <+ changed.map(lambda s, old: (s.session, s.item, max(0, old.n + s.qty)))
        self.state <+ self.step.notin(
            self.state, self.step.session == self.state.session, self.step.item == self.state.item
        ).map(lambda s: (s.session, s.item, max(0, s.qty)))

    @bloom
    def tally(self) -> None:
        self.done <= self.applied.group(["session"], count())
        self.final <= self.state
    # fmt: on


class LoopbackDisorderlyCart(CartClient, DisorderlyCart):
    """Client and disorderly server mixed into one program, talking over the loopback channel."""


class LoopbackDestructiveCart(CartClient, DestructiveCart):
    """Client and destructive server mixed into one program, talking over the loopback channel."""


SESSION_ACTIONS: list[Action] = [
    ("r1", "apples", 3),
    ("r2", "pears", 2),
    ("r3", "apples", -1),
    ("r4", "plums", 1),
    ("r5", "plums", -1),
]


def expected_cart(actions: Iterable[Action]) -> tuple[tuple[str, int], ...]:
    """The order-free answer: signed quantities summed per item, positive totals kept."""
    total: Counter[str] = Counter()
    for _, item, qty in actions:
        total[item] += qty
    return tuple(sorted((i, n) for i, n in total.items() if n > 0))


def points_of_order(cls: type[Program]) -> list[str]:
    """The non-monotone rules of ``cls`` that lie downstream of channels, one line each."""
    out: list[str] = []
    for rule, channels in cls.ir().nonmonotone_after_channels():
        body = repr(rule.body)
        what = next(
            (op for op in ("notin", "group", "argmin", "argmax", "choose") if op in body), "?"
        )
        out.append(
            f"line {rule.line} ({rule.block}): {rule.head} {rule.op} {what}(...) "
            f"after {', '.join(channels)}"
        )
    return out


def run_cart(
    server_cls: type[CartServer],
    batches: Sequence[Sequence[Action]],
    *,
    session: str = "s1",
    max_ticks: int = 50,
    network: LocalNetwork | None = None,
) -> tuple[tuple[str, int], ...] | None:
    """Run one session on a ``LocalNetwork``: the client sends ``batches[i]`` in its i-th tick.

    The checkout (announcing ``sum(len(b) for b in batches)`` actions) is sent with the first
    batch, so it may well arrive before the actions it counts. Returns the server's answer, or
    ``None`` if none arrived within ``max_ticks`` ticks. Pass a ``network`` (for instance
    ``LocalNetwork(seed, max_delay=3, dup_prob=0.3)``) to delay, reorder and duplicate messages.
    """
    net = LocalNetwork() if network is None else network
    client = CartClient(addr="client", network=net)
    server_cls(addr="server", network=net)
    n = sum(len(b) for b in batches)
    client.client_checkout.insert([("server", "client", session, n)])
    for tick in range(max_ticks):
        if tick < len(batches):
            client.client_action.insert(
                [("server", "client", session, r, item, qty) for r, item, qty in batches[tick]]
            )
        net.tick()
        got: dict[str, tuple[tuple[str, int], ...]] = {r.session: r.items for r in client.response}
        if session in got:
            return got[session]
    return None


def main() -> dict[str, Any]:
    """Run both carts on the same actions, in order and with a removal overtaking its add."""
    print("Shopping cart: the same session, two servers, two message orders.\n")
    print(
        "actions:", ", ".join(f"{r} {'+' if q > 0 else ''}{q} {i}" for r, i, q in SESSION_ACTIONS)
    )
    in_order = [[a] for a in SESSION_ACTIONS]
    # the removal of a plum (r5) arrives first; the pears arrive last, with the apples batch
    reordered = [
        [SESSION_ACTIONS[4]],
        [SESSION_ACTIONS[0], SESSION_ACTIONS[2]],
        [SESSION_ACTIONS[3]],
        [SESSION_ACTIONS[1]],
    ]
    orders = {"in order": in_order, "reordered": reordered}
    want = expected_cart(SESSION_ACTIONS)
    print(f"expected checkout (order-free sums): {want}\n")
    results: dict[str, dict[str, Any]] = {}
    for server in (DisorderlyCart, DestructiveCart):
        results[server.__name__] = {}
        for label, batches in orders.items():
            got = run_cart(server, batches)
            results[server.__name__][label] = got
            mark = "same as expected" if got == want else "DIFFERS"
            print(f"  {server.__name__:<16} {label:<10} -> {got}  ({mark})")
    print("\nPoints of order (CALM analysis: non-monotone rules downstream of a channel):")
    for server in (DisorderlyCart, DestructiveCart):
        points = points_of_order(server)
        print(f"  {server.__name__}: {len(points)}")
        for line in points:
            print(f"    {line}")
    print(
        "\nThe disorderly cart's points of order are the checkout's aggregates, and it orders\n"
        "them once per session by waiting for the announced number of actions (a seal): the\n"
        "order of messages cannot change its answer. The destructive cart also has points of\n"
        "order on every action (argmin over its queue, notin on its state), which nothing\n"
        "coordinates: when '-1 plums' overtakes '+1 plums', the count is clamped at zero and\n"
        "the removal is lost, so the reordered run keeps a plum."
    )
    return {
        "expected": want,
        "results": results,
        "points_of_order": {
            s.__name__: points_of_order(s) for s in (DisorderlyCart, DestructiveCart)
        },
    }


if __name__ == "__main__":
    main()
