"""Distributed programs whose outcome depends on message order, and confluent ones to compare
(issue 20, bug 6): the checker's and the CALM analysis's test programs.

* ``Candidate``: an election by timeout. A node whose election deadline passes before it has
  heard of a leader proclaims itself (a ``notin`` over what the channel brought) and tells its
  peers. With node ``a`` timing out at 1.0 s and ``b`` at 1.6 s, ``a`` wins when its message
  reaches ``b`` within 0.6 s; later, both lead.
* ``LastWriterRegister``: a register that keeps the value of the last write to arrive
  (``<+-`` fed by a channel).
* ``AddRemoveCart``: a cart that adds and removes items as the messages come (``<-`` fed by a
  channel): a removal that overtakes its add is lost, and the item stays.
* ``Heartbeats``: every node tells its peers it is alive on a timer and keeps the set of
  peers it has heard from (an ``lset``): monotone, so confluent (CALM).
"""

from __future__ import annotations

from typing import Any

from blooml import Program, bloom, channel, interface, lset, periodic, scratch, table

#: The election deadlines (virtual seconds after start) of the two candidates.
DEADLINES = {"a": 1.0, "b": 1.6}


class Candidate(Program):
    """Elects itself leader when its deadline passes before it heard of a leader."""

    peer = table(["addr"])
    deadline = table(["at"])
    timer = periodic(0.5)
    leader_chn = channel(["@to", "leader"])
    heard = table(["leader"])
    due = scratch(["me"])
    leader = table(["who"])

    # fmt: off
    @bloom
    def rules(self) -> None:
        self.heard <= self.leader_chn.map(lambda m: (m.leader,))
        self.due <= self.timer.join(self.deadline).map(
            lambda t, d: (self.addr,) if t.time >= d.at else None
        )
        self.leader <= self.due.notin(self.heard, lambda d, h: True)
        self.leader_chn <~ self.leader.join(self.peer).map(lambda me, p: (p.addr, me.who))
    # fmt: on


def election_nodes(sim: Any) -> list[Any]:
    """Two candidates on ``sim``, each knowing the other."""
    nodes = [Candidate(addr=a, network=sim) for a in DEADLINES]
    for p in nodes:
        p.peer.insert([(o,) for o in DEADLINES if o != p.addr])
    return nodes


ELECTION_INPUTS = {a: {"deadline": [(t,)]} for a, t in DEADLINES.items()}


class Client(Program):
    """Sends what is put in ``put`` (a register write) or ``add``/``remove`` (cart actions)."""

    put = interface(["to", "value"])
    add = interface(["to", "item"])
    remove = interface(["to", "item"])
    write_chn = channel(["@to", "value"])
    add_chn = channel(["@to", "item"])
    remove_chn = channel(["@to", "item"])

    # fmt: off
    @bloom
    def rules(self) -> None:
        self.write_chn <~ self.put
        self.add_chn <~ self.add
        self.remove_chn <~ self.remove
    # fmt: on


class LastWriterRegister(Program):
    """Keeps the value of the last write to arrive: ``<+-`` fed by a channel."""

    write_chn = channel(["@to", "value"])
    register = table(["slot"], ["value"])

    # fmt: off
    @bloom
    def rules(self) -> None:
        self.register <+- self.write_chn.map(lambda w: ("x", w.value))
    # fmt: on


class AddRemoveCart(Program):
    """Adds and removes items as the messages come: ``<-`` fed by a channel."""

    add_chn = channel(["@to", "item"])
    remove_chn = channel(["@to", "item"])
    cart = table(["item"])

    # fmt: off
    @bloom
    def rules(self) -> None:
        self.cart <= self.add_chn.map(lambda m: (m.item,))
        self.cart <- self.remove_chn.map(lambda m: (m.item,))
    # fmt: on


def client_server(server: type) -> Any:
    """A factory: a ``Client`` at ``client`` and a ``server`` program at ``server``."""

    def make(sim: Any) -> list[Any]:
        return [Client(addr="client", network=sim), server(addr="server", network=sim)]

    return make


REGISTER_INPUTS = [(0.01 * i, "client", "put", [("server", v)]) for i, v in enumerate("xyz")]
CART_INPUTS = [
    (0.0, "client", "add", [("server", "apple"), ("server", "pear")]),
    (0.01, "client", "remove", [("server", "apple")]),
]


class Heartbeats(Program):
    """Tells its peers it is alive every period; keeps who it has heard from (monotone)."""

    peer = table(["addr"])
    beat = periodic(0.2)
    alive_chn = channel(["@to", "frm"])
    heard = lset()

    # fmt: off
    @bloom
    def rules(self) -> None:
        self.alive_chn <~ self.beat.join(self.peer).map(lambda b, p: (p.addr, self.addr))
        self.heard <= self.alive_chn.map(lambda m: m.frm)
    # fmt: on


def heartbeat_nodes(sim: Any) -> list[Any]:
    """Three ``Heartbeats`` nodes that know each other."""
    names = ["h0", "h1", "h2"]
    nodes = [Heartbeats(addr=a, network=sim) for a in names]
    for p in nodes:
        p.peer.insert([(o,) for o in names if o != p.addr])
    return nodes
