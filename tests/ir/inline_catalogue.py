"""A fixed catalogue of rule functions for the per-version inline test
(``test_ir_inline_catalogue.py``). Do not edit an entry: the test pins, for each CPython
version, which of these are recovered as expressions; add new entries instead."""

from __future__ import annotations

from typing import Any

from blooml import lmax, lmin, lset

# more than 256 names: their indexes need EXTENDED_ARG
_BIG = eval(
    "lambda r: (" + ", ".join(" + ".join(f"r.a{i}_{j}" for j in range(9)) for i in range(30)) + ")"
)


def _closure() -> Any:
    k = 3
    return lambda r: (r.a, k)


CATALOGUE: dict[str, Any] = {
    # the idiomatic rules of the README and examples/shortest_paths.py
    "sp_base": lambda lk: (lk.src, lk.dst, lmin(lk.c)),
    "sp_step": lambda lk, p: (lk.src, p.dst, p.c + lk.c),
    "sp_step_hop": lambda lk, p: (lk.src, p.dst, lk.dst, p.c + lk.c),
    "sp_base_hop": lambda lk: (lk.src, lk.dst, "direct", lmin(lk.c)),
    "tc_step": lambda lk, p: (lk.src, p.dst),
    "sssp_source": lambda s: (s.v, lmin(0)),
    "kvs_put": lambda p: (p.key, lmax((p.version, p.value))),
    "widest": lambda w, lk: (w.src, lk.dst, w.w.min_of(lk.c)),
    "three_way": lambda a, b, c: (a.x, b.y + c.z, lmin(c.w)),
    "empty_set": lambda r: (r.k, lset()),
    "method_gt": lambda r: r.flag.gt(3),
    "notin_match": lambda x, y: x.y < y.y,
    "one_column": lambda p: p.src,
    "swap_pair": lambda a, b: (b, a),  # LOAD_FAST_LOAD_FAST on 3.13
    "subscript": lambda r: (r[0], r[1] * 2),
    "unary": lambda r: (-r.a, ~r.b),
    "unary_plus": lambda r: (+r.a,),  # UNARY_POSITIVE on 3.11; an intrinsic call later
    "negation": lambda r: not r.a,  # TO_BOOL on 3.13
    "constant": lambda r: 5,  # RETURN_CONST on 3.12 and later
    "constant_none": lambda r: None,
    "compare_chain_free": lambda r, s: (r.a == s.b, r.c >= 2),
    "big_tuple": _BIG,
    # never recovered (called as Python)
    "closure": _closure(),
    "builtin_call": lambda r: (r.a, len(r)),
    "nonmonotone_method": lambda r: (r.a, r.c.reveal()),
    "conditional": lambda r: (r.a if r.b else r.c,),
    "chained_compare": lambda r: 0 < r.a < 5,
}
