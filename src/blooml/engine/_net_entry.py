"""A runtime's network entry points: where messages leave a program (``check_addr`` in the
sending rule, ``send`` once the tick has committed) and where they enter it (``receive``,
``receive_batch``), with the tracing hooks of both ends. See ``docs/net.md``.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from blooml.engine._coltypes import families
from blooml.engine.relation import MISSING, CheckedRows
from blooml.engine.trace import message_key
from blooml.errors import ProgramError
from blooml.ir.coltypes import check_column_types

if TYPE_CHECKING:
    from blooml.engine.runtime import Runtime


# While a runtime hands its messages to the transport: (sender address, message identities by
# content key, or None when the sender does not trace), so that an in-process receiver can
# record who sent what (a transport from elsewhere passes the sender to receive_batch).
_sending = threading.local()


def send_outbox(
    rt: Runtime,
    outbox: list[tuple[Any, str, tuple[Any, ...], Any]],
    ids: dict[str, list[str]] | None,
) -> None:
    """Send a committed tick's messages, batched by address (``ids``: their identities by
    content key when the tick is traced, for an in-process receiver to record them)."""
    batches: dict[Any, list[tuple[str, tuple[Any, ...], Any]]]
    if len(outbox) == 1:  # a request's reply
        addr, chan, row, wire = outbox[0]
        batches = {addr: [(chan, row, wire)]}
    else:
        batches = {}
        for addr, chan, row, wire in outbox:
            b = batches.get(addr)
            if b is None:
                batches[addr] = b = []
            b.append((chan, row, wire))
    prev = getattr(_sending, "info", None)
    _sending.info = (rt.addr, ids)
    try:
        for addr, batch in batches.items():
            send(rt, addr, batch)  # (``rt.send``, without the method's call)
    finally:
        _sending.info = prev


def check_addr(rt: Runtime, addr: Any, chan: str, row: Any, where: str = "") -> Any:
    """Check a message at its sending rule (inside the tick: an error rolls it back).

    Returns the transport's token for the message (a socket transport encodes the row
    here, so a value that cannot travel fails the rule), passed back to ``deliver``.
    """
    if rt.network is not None:
        return rt.network.check(rt, addr, chan, row, where)
    if addr != rt.addr:
        raise ProgramError(
            f"channel {chan!r}: message {tuple(row)!r} is addressed to {addr!r}, but this "
            f"program ({rt.addr!r}) has no network; only its own address is delivered "
            "(loopback). Pass network=LocalNetwork() to connect programs, or bind a "
            "host:port address"
        )
    return None


def send(rt: Runtime, addr: Any, batch: list[tuple[str, tuple[Any, ...], Any]]) -> None:
    """Hand the messages a committed tick sends to ``addr`` to the transport, together.

    ``batch`` holds ``(channel, row, token)`` in the order the rules produced them
    (``token`` is what the transport's ``check`` returned). The one place sends leave a
    program (tracing hooks here).
    """
    if rt.network is not None:
        rt.network.deliver(rt, addr, batch)
    else:
        for chan, row, _ in batch:
            rt.receive(chan, row)


def receive(rt: Runtime, chan: str, row: tuple[Any, ...]) -> None:
    """A message arrived on channel ``chan`` (in-process): visible at this program's next
    tick. A key conflict with another queued message fails that tick, as any conflict."""
    rt.receive_batch(None, [(chan, [row])], refuse_conflicts=False)


def receive_batch(rt: Runtime, sender: Any, batches: Any, refuse_conflicts: bool = True) -> int:
    """Messages arrived (from ``sender``, if known): visible at this program's next tick.

    ``batches`` holds ``(channel, rows)`` pairs. All or nothing: raises ``ProgramError``
    with nothing queued if a channel is not a channel of this program or a row does not
    fit it (wrong arity, a lattice in a key column, an unhashable value) or, with
    ``refuse_conflicts`` (network arrivals), if a row's key conflicts with a message
    already queued for the same tick (which would fail that tick for every message), or, with
    ``column_types="spark"``, holds a value its column cannot hold (``ColumnValueError``).
    Returns the number of rows queued. The one place messages enter a program (tracing
    hooks here).
    """
    n = 0
    for _chan, rows in receive_checked(rt, sender, batches, refuse_conflicts):
        n += len(rows)
    return n


def receive_checked(
    rt: Runtime, sender: Any, batches: Any, refuse_conflicts: bool = True
) -> list[tuple[str, list[Any]]]:
    """:func:`receive_batch`, returning the ``(channel, rows)`` it queued: each ``rows`` a
    list of checked rows of its own (``CheckedRows``), which the queue holds a copy of (a
    transport keeps them as the input unit of what it received; see ``blooml.net``). The
    one pass of every check ``receive_batch`` makes, in the same order; the message's
    origin is spelled out only for an error."""
    rels = rt.rels
    pend = rt.pending
    spark = refuse_conflicts and rt.column_types == "spark"
    if len(batches) == 1 and not spark and rt.tracer is None:
        chan, rows = batches[0]
        if len(rows) == 1:  # one row (a request): the same checks, without the staging
            return _receive_one(rt, sender, chan, rows, refuse_conflicts)
    checked: list[tuple[str, list[Any]]] = []
    staged: dict[str, dict[Any, Any]] | None = None
    for chan, rows in batches:
        rel = rels.get(chan)
        if rel is None or rel.info.kind != "channel":
            raise ProgramError(
                f"message on {chan!r} from {sender!r}: this program has no channel of that name"
            )
        out = rel.check_rows(rows if type(rows) is list else list(rows), f"message on {chan}")
        if spark:
            # a value its column cannot hold would fail the tick for every message: refuse
            # this message instead (nothing queued)
            check_column_types(chan, rel.columns, out, families(rt, chan))
        try:
            for r in out:
                hash(r)
        except TypeError:
            raise ProgramError(
                f"message on {chan} from {sender!r}: an unhashable value in {r!r}"
            ) from None
        keyfn = rel.keyfn
        if refuse_conflicts and keyfn is not None:
            # a key conflict with a message already queued for this tick would fail the
            # whole tick: refuse this message instead (nothing queued)
            queued = pend.chan_keys.get(chan, _NONE)
            if staged is None:
                staged = {}
            mine = staged.get(chan)
            if mine is None:
                mine = staged[chan] = {}
            for r in out:
                k = keyfn(r)
                old = mine.get(k, MISSING)
                if old is MISSING:
                    old = queued.get(k, MISSING)
                if old is MISSING:
                    mine[k] = r
                elif old != r:
                    mine[k] = _merge_queued(rel, chan, sender, k, old, r)
        checked.append((chan, out))
    inserts = pend.inserts
    for chan, rows in checked:
        have = inserts.get(chan)
        if have is None:
            inserts[chan] = CheckedRows(rows)
        else:  # (checked rows added to unchecked ones stay checked at the tick)
            have.extend(rows)
    if staged is not None:
        keys = pend.chan_keys
        for chan, keyed in staged.items():
            have_keys = keys.get(chan)
            if have_keys is None:
                keys[chan] = keyed
            else:
                have_keys.update(keyed)
    if rt.tracer is not None:
        trace_receipts(rt, sender, checked)
    return checked


_NONE: dict[Any, Any] = {}


def _merge_queued(rel: Any, chan: str, sender: Any, k: Any, old: Any, r: Any) -> Any:
    """Row ``r`` merged into ``old``, queued under key ``k`` of channel ``chan`` for this
    tick; a merge that fails (two rows the key cannot hold) refuses the message from
    ``sender`` with a :class:`ProgramError` (nothing queued)."""
    try:
        return rel._merge(k, old, r)
    except Exception as exc:
        raise ProgramError(f"message on {chan} from {sender!r}: {exc}") from None


def _receive_one(
    rt: Runtime, sender: Any, chan: str, rows: Any, refuse_conflicts: bool
) -> list[tuple[str, list[Any]]]:
    """:func:`receive_checked` of one message of one row (a request), untraced and without
    ``column_types="spark"``: the same checks in the same order, with nothing staged (one
    row has nothing to conflict with but the queued messages)."""
    rel = rt.rels.get(chan)
    if rel is None or rel.info.kind != "channel":
        raise ProgramError(
            f"message on {chan!r} from {sender!r}: this program has no channel of that name"
        )
    out = rel.check_rows(rows if type(rows) is list else list(rows), f"message on {chan}")
    r = out[0]
    try:
        hash(r)
    except TypeError:
        raise ProgramError(
            f"message on {chan} from {sender!r}: an unhashable value in {r!r}"
        ) from None
    pend = rt.pending
    keyfn = rel.keyfn
    if refuse_conflicts and keyfn is not None:
        # a key conflict with a message already queued for this tick would fail the whole
        # tick: refuse this message instead (nothing queued)
        keys = pend.chan_keys.get(chan)
        k = keyfn(r)
        if keys is None:
            pend.chan_keys[chan] = {k: r}
        else:
            old = keys.get(k, MISSING)
            if old is MISSING:
                keys[k] = r
            elif old != r:
                keys[k] = _merge_queued(rel, chan, sender, k, old, r)
    have = pend.inserts.get(chan)
    if have is None:
        pend.inserts[chan] = CheckedRows(out)
    else:  # (checked rows added to unchecked ones stay checked at the tick)
        have.extend(out)
    return [(chan, out)]


def trace_receipts(rt: Runtime, sender: Any, checked: list[tuple[str, list[Any]]]) -> None:
    """Record arrived messages; an in-process delivery tells who sent them, and which."""
    assert rt.tracer is not None
    info = getattr(_sending, "info", None)
    ids = None
    if info is not None:
        sender = sender if sender is not None else info[0]
        ids = info[1]
    for chan, rows in checked:
        for row in rows:
            msg = None
            if ids:
                queue = ids.get(message_key(chan, rt.addr, row))
                msg = queue.pop(0) if queue else None
            rt.tracer.recv(rt, chan, row, sender, msg)
