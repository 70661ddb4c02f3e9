"""examples/shopping_cart.py: the disorderly cart is confluent, the destructive one is not."""

from __future__ import annotations

from collections import Counter

from _examples import load_example
from hypothesis import given
from hypothesis import strategies as st

from blooml import LocalNetwork

cart = load_example("shopping_cart")

Action = tuple[str, str, int]


def destructive_model(arrival: list[list[Action]]) -> tuple[tuple[str, int], ...]:
    """Apply actions in arrival order (ties in one batch by reqid), clamping counts at zero."""
    count: Counter[str] = Counter()
    for batch in arrival:
        for _, item, qty in sorted(batch):
            count[item] = max(0, count[item] + qty)
    return tuple(sorted((i, n) for i, n in count.items() if n > 0))


@st.composite
def sessions(draw: st.DrawFn) -> tuple[list[Action], list[list[Action]]]:
    """A session's actions and one arrival schedule: a permutation cut into batches."""
    raw = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["apples", "pears", "plums"]),
                st.integers(-3, 3).filter(bool),
            ),
            max_size=6,
        )
    )
    actions = [(f"r{i:02d}", item, qty) for i, (item, qty) in enumerate(raw)]
    order = draw(st.permutations(actions))
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(order) - 1)), max_size=3)))
    batches, start = [], 0
    for c in [*cuts, len(order)]:
        if c > start:
            batches.append(order[start:c])
            start = c
    return actions, batches


def test_main_results() -> None:
    out = cart.main()
    want = (("apples", 2), ("pears", 2))
    assert out["expected"] == want
    assert out["results"]["DisorderlyCart"] == {"in order": want, "reordered": want}
    assert out["results"]["DestructiveCart"]["in order"] == want
    # '-1 plums' overtook '+1 plums': the destructive cart lost the removal
    assert out["results"]["DestructiveCart"]["reordered"] == (
        ("apples", 2),
        ("pears", 2),
        ("plums", 1),
    )


@given(sessions())
def test_disorderly_cart_is_confluent(session: tuple[list[Action], list[list[Action]]]) -> None:
    actions, batches = session
    assert cart.run_cart(cart.DisorderlyCart, batches) == cart.expected_cart(actions)


@given(sessions())
def test_destructive_cart_applies_arrival_order(
    session: tuple[list[Action], list[list[Action]]],
) -> None:
    _, batches = session
    assert cart.run_cart(cart.DestructiveCart, batches) == destructive_model(batches)


def test_empty_session_checks_out_empty() -> None:
    assert cart.run_cart(cart.DisorderlyCart, []) == ()
    assert cart.run_cart(cart.DestructiveCart, []) == ()


def test_checkout_waits_for_every_announced_action() -> None:
    """A checkout that overtakes the actions is answered only once they are all in."""
    actions = [("r1", "apples", 1), ("r2", "pears", 1)]
    got = cart.run_cart(cart.DisorderlyCart, [[], [], [actions[0]], [], [actions[1]]])
    assert got == (("apples", 1), ("pears", 1))


def test_answers_once_and_forgets_the_checkout() -> None:
    net = LocalNetwork()
    client = cart.CartClient(addr="client", network=net)
    server = cart.DisorderlyCart(addr="server", network=net)
    client.client_action.insert([("server", "client", "s", "r1", "kiwis", 2)])
    client.client_checkout.insert([("server", "client", "s", 1)])
    net.tick(n=6)
    assert {tuple(r) for r in client.response} == {("s", (("kiwis", 2),))}
    assert list(server.checkout_log) == []  # deleted (<-) once answered
    assert {(r.session, r.reqid) for r in server.action_log} == {("s", "r1")}


def test_loopback_mixins_run_in_one_program() -> None:
    for cls in (cart.LoopbackDisorderlyCart, cart.LoopbackDestructiveCart):
        p = cls()  # addr "localhost": the channels loop back
        p.client_action.insert(
            [
                ("localhost", "localhost", "s", "r1", "figs", 2),
                ("localhost", "localhost", "s", "r2", "figs", -1),
            ]
        )
        p.client_checkout.insert([("localhost", "localhost", "s", 2)])
        p.tick(8)
        assert {tuple(r) for r in p.response} == {("s", (("figs", 1),))}, cls.__name__


@given(sessions(), st.integers(0, 2**16))
def test_disorderly_cart_is_confluent_on_a_chaotic_network(
    session: tuple[list[Action], list[list[Action]]], seed: int
) -> None:
    """Messages delayed 0..3 rounds (so reordered) and duplicated: the same answer."""
    actions, batches = session
    net = LocalNetwork(seed, max_delay=3, dup_prob=0.3)
    got = cart.run_cart(cart.DisorderlyCart, batches, network=net, max_ticks=80)
    assert got == cart.expected_cart(actions)


def test_destructive_cart_is_not_confluent_on_a_chaotic_network() -> None:
    """Some delay/duplication schedule changes the destructive cart's answer (a duplicated
    action is applied twice; a removal overtaking its addition is lost)."""
    batches = [[a] for a in cart.SESSION_ACTIONS]
    want = cart.expected_cart(cart.SESSION_ACTIONS)
    answers = set()
    for seed in range(30):
        net = LocalNetwork(seed, max_delay=3, dup_prob=0.3)
        answers.add(cart.run_cart(cart.DestructiveCart, batches, network=net, max_ticks=80))
    assert any(a != want for a in answers), answers


def test_points_of_order() -> None:
    """CALM analysis: both carts aggregate at checkout; only the destructive one orders every
    action (argmin over its queue)."""
    dis = cart.points_of_order(cart.DisorderlyCart)
    des = cart.points_of_order(cart.DestructiveCart)
    assert any("final <= group" in p for p in dis)
    assert not any("argmin" in p for p in dis)
    assert any("step <= argmin" in p for p in des)
