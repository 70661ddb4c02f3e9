"""Readable Spark jobs: every job a tick starts says what it is.

:func:`tick` wraps one tick (``SparkEngine.run``/``tick``) and :func:`label` marks each step
inside it (stratum, round, rule, the merge into a head). On a classic session the step is the
job description (``spark.job.description``: the Spark UI's and the status store's
*Description*) and the job's call site (its *name*, instead of ``localCheckpoint at
<unknown>:0`` or ``first at _dfengine.py:577``), and the tick carries the job tag
``blooml:<program>:tick=<n>``. On Spark Connect, where a client can set neither, the tick's tag
and a tag per step (``blooml:<program>:tick=<n>:stratum=<s>:round=<r>:rule=<i>``) are added
with ``spark.addTag``. What the session carried before the tick (the user's own description,
call site and tags, a notebook's job group) is restored after it and never replaced by a
job group.

:func:`log_round` writes the one INFO line per fixpoint round that both paths log.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

from blooml.ir import ProgramIR
from blooml.spark._lazy import is_connect

__all__ = ["failure", "label", "log_round", "tick"]

#: Each fixpoint round at INFO: the rows new per head and the lattice variables that grew.
log = logging.getLogger("blooml.spark")

_DESCRIPTION = "spark.job.description"
_CALL_SITE = ("callSite.short", "callSite.long")

_CURRENT: ContextVar[_Tick | None] = ContextVar("blooml_spark_tick", default=None)


class _Tick:
    """The labels of one tick's jobs, applied to its session as the steps change."""

    def __init__(self, spark: Any, program: str, tick: int | str, step: str = "tick") -> None:
        self.spark = spark
        self.program = program
        self.tick = tick
        self.step = step
        self.connect = is_connect(spark)
        self.stratum: int | None = None
        self.round: int | None = None
        self.rule: Any = None
        self.what = ""
        self.base_tag = f"blooml:{_tag_safe(program)}:{_tag_safe(step.split()[0])}={tick}"
        self.step_tag: str | None = None

    def _compose(
        self, head: str, stratum: str, rnd: str, rule: Callable[[Any], str], what: str
    ) -> str:
        out = head
        if self.stratum is not None:
            out += stratum.format(self.stratum)
            if self.round is not None:
                out += rnd.format(self.round)
        if self.rule is not None:
            out += rule(self.rule)
        elif self.what:
            out += what.format(self.what)
        return out

    def text(self) -> str:
        """``blooml Reach tick 3, stratum 0 round 2: rule 1 (reach.py:20, block rules): ...``."""
        head = f"blooml {self.program} {self.step} {self.tick}"
        return self._compose(
            head, ", stratum {}", " round {}", lambda r: f": {r.describe()}", ": {}"
        )

    def short(self) -> str:
        """The job's name: ``blooml Reach tick 3 s0 r2 rule 1 (reach.py:20)``."""
        head = f"blooml {self.program} {self.step} {self.tick}"
        return self._compose(head, " s{}", " r{}", lambda r: f" rule {r.index} ({r.where})", " {}")

    def tag(self) -> str:
        """``blooml:Reach:tick=3:stratum=0:round=2:rule=1`` (a Spark Connect job tag)."""
        return _tag_safe(
            self._compose(
                self.base_tag, ":stratum={}", ":round={}", lambda r: f":rule={r.index}", ":{}"
            )
        )

    def apply(self) -> None:
        try:
            if self.connect:
                tag = self.tag()
                if tag != self.step_tag:
                    if self.step_tag is not None and self.step_tag != self.base_tag:
                        self.spark.removeTag(self.step_tag)
                    if tag != self.base_tag:
                        self.spark.addTag(tag)
                    self.step_tag = tag
                return
            sc = self.spark.sparkContext
            text = self.text()
            sc.setLocalProperty(_DESCRIPTION, text)
            sc.setLocalProperty(_CALL_SITE[0], self.short())
            sc.setLocalProperty(_CALL_SITE[1], text)
        except Exception:  # pragma: no cover - labels must never fail a tick
            log.debug("could not label the Spark jobs of %s", self.text(), exc_info=True)


def _tag_safe(text: str) -> str:
    """A job tag cannot hold commas (Spark's tag separator) and must not be empty."""
    return text.replace(",", ";").strip() or "_"


@contextlib.contextmanager
def tick(spark: Any, program: str, tick: int | str, step: str = "tick") -> Iterator[None]:
    """Label every Spark job started inside with the program and the tick (and, through
    :func:`label`, the step), restoring the session's own labels afterwards. ``step``:
    ``"maintenance after tick"`` for the work the engine does between ticks."""
    state = _Tick(spark, program, tick, step)
    saved: dict[str, Any] = {}
    depth = None
    try:
        if state.connect:
            spark.addTag(state.base_tag)
        else:
            sc = spark.sparkContext
            for key in (_DESCRIPTION, *_CALL_SITE):
                saved[key] = sc.getLocalProperty(key)
            sc.addJobTag(state.base_tag)
            depth = _hold_call_site()
    except Exception:  # pragma: no cover - labels must never fail a tick
        log.debug("could not label the Spark jobs of %s", state.text(), exc_info=True)
    token = _CURRENT.set(state)
    state.apply()
    try:
        yield
    finally:
        _CURRENT.reset(token)
        try:
            if state.connect:
                if state.step_tag is not None and state.step_tag != state.base_tag:
                    spark.removeTag(state.step_tag)
                spark.removeTag(state.base_tag)
            else:
                sc = spark.sparkContext
                for key, value in saved.items():
                    sc.setLocalProperty(key, value)  # None removes the property
                sc.removeJobTag(state.base_tag)
        except Exception:  # pragma: no cover - labels must never fail a tick
            log.debug("could not restore the Spark job labels", exc_info=True)
        finally:
            if depth is not None:
                depth.__exit__(None, None, None)


def label(
    *,
    stratum: int | None = None,
    round: int | None = None,
    rule: Any = None,
    what: str = "",
    end: bool = False,
) -> None:
    """Name the step the next Spark jobs of the current tick belong to (no-op outside
    :func:`tick`): a new ``stratum`` starts at round 0; a ``round`` keeps the stratum; a
    ``rule`` (an IR :class:`~blooml.ir.Rule`) or ``what`` (``"merge into path"``) names the
    work inside the round; ``end`` the work after the strata (the temporal rules)."""
    state = _CURRENT.get()
    if state is None:
        return
    if end:
        state.stratum = state.round = None
        what = what or ("end of tick" if rule is None else "")
    if stratum is not None:
        state.stratum, state.round = stratum, None
    if round is not None:
        state.round = round
    state.rule, state.what = rule, what
    state.apply()


def log_round(
    program: str, stratum: int, rnd: int, rows_new: dict[str, int], grown: set[str]
) -> None:
    """One INFO line per fixpoint round, as every path logs it."""
    log.info(
        "%s stratum %d round %d: rows new %s, lattices grown %s",
        program,
        stratum,
        rnd,
        rows_new or "{}",
        sorted(grown) or "[]",
    )


def failure(exc: BaseException, ir: ProgramIR, stratum: tuple[int, ...]) -> str:
    """One line for a failed stratum (both paths log it at WARNING): the error (from a worker's
    traceback if need be) and the rule that raised (its note), else the stratum's rules."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    errs = [ln for ln in lines if re.match(r"^[A-Za-z_][\w.]*(Error|Exception)\b", ln)]
    what = errs[-1] if errs else f"{type(exc).__name__}: {lines[0] if lines else ''}"
    notes = [n for n in getattr(exc, "__notes__", ()) if "(on Spark)" in n]
    notes += [ln for ln in lines if ln.endswith("(on Spark)")]
    where = notes[-1] if notes else "; ".join(ir.rules[r].describe() for r in stratum[:3])
    return f"{what} ({where})"


class _CallSiteHold:
    """Keeps PySpark from replacing the job call site blooml set (``first at file.py:12``)
    and clearing it after each action: PySpark sets its own only when no action is in
    progress, which is what this counts as, for the tick."""

    def __init__(self, cls: Any) -> None:
        self.cls = cls
        cls._spark_stack_depth += 1

    def __exit__(self, *exc: Any) -> None:
        self.cls._spark_stack_depth -= 1


def _hold_call_site() -> _CallSiteHold | None:
    try:
        from pyspark.traceback_utils import SCCallSiteSync
    except ImportError:  # pragma: no cover - PySpark moved it: its names stay
        return None
    if not isinstance(getattr(SCCallSiteSync, "_spark_stack_depth", None), int):
        return None  # pragma: no cover - PySpark changed
    return _CallSiteHold(SCCallSiteSync)
