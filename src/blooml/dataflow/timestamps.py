"""Timestamps: epochs at the root, ``(epoch, iteration, ...)`` tuples in nested circuits.

The root circuit counts epochs with unsigned ints. Each nested (child) circuit refines its
parent's timestamp with one more unsigned int, its iteration counter, so a child of the root
runs at ``(epoch, iteration)`` and a grandchild at ``(epoch, i, j)``. Tuples are ordered by the
*product order* (``leq``): ``(0, 2)`` and ``(1, 1)`` are incomparable. Circuits *process*
times in lexicographic order, a linear extension of the product order.

``None`` stands for "no timestamp" (entries added by ``UntimedTraceAppend``): it is below every
time.
"""

from __future__ import annotations

from itertools import product
from typing import Any

from blooml.dataflow.errors import TimestampError

__all__ = ["Time", "as_tuple", "check_time", "corners", "leq", "lub", "outer"]

#: An epoch, a tuple ``(epoch, iteration, ...)``, or ``None`` (untimed).
Time = int | tuple[int, ...] | None


def check_time(t: Any, where: str) -> Time:
    """Validate ``t`` as a timestamp and return it.

    Raises:
        TimestampError: ``t`` is not ``None``, an unsigned int or a non-empty tuple of them.
    """
    if t is None:
        return None
    if type(t) is int:
        if t < 0:
            raise TimestampError(t, where, "epochs are unsigned: use 0, 1, 2, ...")
        return t
    if type(t) is tuple and t and all(type(c) is int and c >= 0 for c in t):
        return t
    raise TimestampError(t, where)


def leq(a: Time, b: Time) -> bool:
    """The product order: ``a <= b`` component-wise (``None`` is below everything)."""
    if a is None:
        return True
    if b is None:
        return False
    if type(a) is int:
        return a <= (b if type(b) is int else b[0])  # type: ignore[index,operator]
    if type(b) is int:
        return a[0] <= b and all(c == 0 for c in a[1:])  # type: ignore[index]
    return all(x <= y for x, y in zip(a, b, strict=True))  # type: ignore[arg-type]


def lub(a: Time, b: Time) -> Time:
    """The least upper bound (component-wise max) of two timestamps of the same shape."""
    if a is None:
        return b
    if b is None:
        return a
    if type(a) is int:
        return a if a >= b else b  # type: ignore[operator,return-value]
    if len(a) == 2:  # type: ignore[arg-type]
        a0, a1 = a  # type: ignore[misc]
        b0, b1 = b  # type: ignore[misc]
        if a0 >= b0 and a1 >= b1:
            return a
        return (a0 if a0 >= b0 else b0, a1 if a1 >= b1 else b1)
    return tuple(x if x >= y else y for x, y in zip(a, b, strict=True))  # type: ignore[arg-type]


def as_tuple(t: Time) -> tuple[int, ...]:
    """The timestamp as a tuple (an epoch ``e`` becomes ``(e,)``)."""
    if t is None:
        return ()
    return (t,) if type(t) is int else t  # type: ignore[return-value]


def outer(t: Time) -> int:
    """The epoch (outermost component) of a timestamp."""
    if t is None:
        return -1
    return t if type(t) is int else t[0]  # type: ignore[index,return-value]


def corners(t: Time) -> list[tuple[Time, int]]:
    """The Möbius corners of ``t``: ``(t - 1_S, (-1)^|S|)`` for every subset S of components.

    The delta of ``f(integral(x))`` at ``t`` is ``sum(sign * f(integral(x)(c)))`` over these
    corners; corners with a negative component are dropped (the integral there is empty).
    """
    if t is None:
        return [(None, 1)]
    if type(t) is int:
        return [(t, 1)] if t == 0 else [(t, 1), (t - 1, -1)]
    out: list[tuple[Time, int]] = []
    comps: tuple[int, ...] = t  # type: ignore[assignment]
    for mask in product((0, 1), repeat=len(comps)):
        c = tuple(x - m for x, m in zip(comps, mask, strict=True))
        if min(c) < 0:
            continue
        out.append((c, -1 if sum(mask) % 2 else 1))
    return out
