"""``blooml repl TARGET``: an interactive shell on one instance of a Bloom^L program.

Like Bud's rebl: insert and delete rows, run ticks, dump collections, list the state and the
rules, draw the program, and step through ticks seeing what each rule derived (the shell
traces the instance in memory, so ``why N`` can show any past tick again).
"""

from __future__ import annotations

import argparse
import ast
import cmd
import io
import json
import shlex
import sys
from pathlib import Path
from typing import IO, Any

from blooml.cli._target import UsageError, load_target

__all__ = ["NAME", "Repl", "register", "run"]

NAME = "repl"
_DESCRIPTION = """\
An interactive shell on one instance of a Bloom^L program (like Bud's rebl). Commands (type
help COMMAND in the shell for more):

  insert COLL ROW [ROW ...]   queue rows (Python literals) for the next tick; for a lattice
                              variable, a value such as lmax(3)
  delete COLL ROW [ROW ...]   queue deletions from a table
  tick [N]                    run N ticks (default 1), one summary line each
  step                        run one tick and show what each rule derived and sent
  why [N]                     show again what tick N (default: the last) took in and derived
  dump [COLL ...]             print collections (all when none named) and lattice values
  state                       list the collections and lattice variables with their sizes
  rules                       print the rules by stratum (blooml analyze's printout)
  plot [FILE]                 draw the program (default program.svg; .dot without Graphviz)
  quit                        leave (also Ctrl-D)

TARGET is package.module:Class or path/to/file.py:Class naming a Program subclass. Commands are
also read from a pipe, one a line, so a session can be scripted.

example:
  blooml repl examples/shortest_paths.py:Paths
  printf 'insert link ("a","b",1)\\ntick\\ndump path\\n' | blooml repl mod.py:Paths"""


def register(subparsers: Any) -> None:
    """Add the ``repl`` subcommand to ``subparsers``."""
    p = subparsers.add_parser(
        NAME,
        help="an interactive shell on one instance of a Bloom^L program (insert, tick, dump...)",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("target", metavar="TARGET", help="package.module:Class or file.py:Class")
    p.add_argument("--addr", default="localhost", help="the instance's address")
    p.set_defaults(func=run)


def _split_rows(src: str) -> list[str]:
    """Split ``ROW [ROW ...]`` at the spaces or commas between top-level expressions."""
    parts: list[str] = []
    depth = 0
    quote = ""
    start = 0
    i = 0
    while i < len(src):
        ch = src[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and ch in " ,\t":
            if src[start:i].strip():
                parts.append(src[start:i].strip())
            start = i + 1
        i += 1
    if quote or depth:
        raise ValueError("unbalanced brackets or quotes")
    if src[start:].strip():
        parts.append(src[start:].strip())
    return parts


def _literal_rows(text: str, lattice_names: dict[str, Any]) -> list[Any]:
    """Parse ``ROW [ROW ...]``: Python literals (tuples), or lattice constructor calls; one
    list of rows (``[(1,), (2,)]``) is also accepted."""
    parts = _split_rows(text)
    if not parts:
        raise ValueError("no rows given")
    values = [_evaluate(ast.parse(p, mode="eval"), lattice_names) for p in parts]
    if len(values) == 1 and isinstance(values[0], list):
        return list(values[0])
    return values


def _evaluate(node: ast.AST, names: dict[str, Any]) -> Any:
    """Literals plus calls of lattice classes (``lmax(3)``, ``lset({1, 2})``); nothing else."""
    if isinstance(node, ast.Expression):
        return _evaluate(node.body, names)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names:
        if node.keywords:
            raise ValueError("keyword arguments are not supported in the shell")
        return names[node.func.id](*(_evaluate(a, names) for a in node.args))
    if isinstance(node, ast.List):
        return [_evaluate(e, names) for e in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_evaluate(e, names) for e in node.elts)
    if isinstance(node, ast.Set):
        return {_evaluate(e, names) for e in node.elts}
    if isinstance(node, ast.Dict):
        return {
            _evaluate(k, names): _evaluate(v, names)
            for k, v in zip(node.keys, node.values, strict=True)
            if k is not None
        }
    return ast.literal_eval(node)


class Repl(cmd.Cmd):
    """The shell (stdlib ``cmd``) on ``program``, an instance traced into memory."""

    prompt = "blooml> "

    def __init__(self, program: Any, stdin: IO[str] | None = None, stdout: IO[str] | None = None):
        super().__init__(stdin=stdin, stdout=stdout)
        if stdin is not None and not stdin.isatty():
            self.use_rawinput = False
            self.prompt = ""
        self.p = program
        self.ir = program.ir
        from blooml import lattices

        self.names = {n: getattr(lattices, n) for n in lattices.__all__}
        self.intro = (
            f"blooml repl: {type(program).__qualname__} at {program.addr!r} "
            f"({len(self.ir.collections)} collections, {len(self.ir.lattices)} lattices, "
            f"{len(self.ir.rules)} rules). Type help or ? to list commands."
        )
        self.status = 0

    # -- helpers --------------------------------------------------------------------------------

    def _say(self, text: str = "") -> None:
        self.stdout.write(text + "\n")

    def _error(self, text: str) -> None:
        self.status = 1
        self._say(f"error: {text}")

    def _state_names(self) -> list[str]:
        return [*self.ir.collections, *self.ir.lattices]

    def _events(self) -> list[dict[str, Any]]:
        buf: io.StringIO = self.p._rt.tracer._file
        return [json.loads(line) for line in buf.getvalue().splitlines()]

    def _tick_events(self, tick: int) -> list[dict[str, Any]]:
        """The events of the last attempt at ``tick`` (and the messages it took)."""
        evs = [e for e in self._events() if e.get("tick") == tick and e["ev"] != "run"]
        starts = [i for i, e in enumerate(evs) if e["ev"] == "tick"]
        recvs = [e for e in evs if e["ev"] == "recv"]
        return recvs + (evs[starts[-1] :] if starts else [])

    def _one_line(self, tick: int) -> str:
        evs = self._tick_events(tick)
        n_in = sum(e["n"] for e in evs if e["ev"] == "input")
        derived = sum(e["n"] for e in evs if e["ev"] == "derive")
        sent = sum(1 for e in evs if e["ev"] == "send")
        ms = next((e["ms"] for e in evs if e["ev"] == "end"), 0.0)
        return f"tick {tick}: took {n_in} rows, derived {derived}, sent {sent} ({ms:.3f} ms)"

    def _run_ticks(self, n: int) -> bool:
        for _ in range(n):
            try:
                self.p.tick()
            except Exception as exc:
                self._error(
                    f"tick {self.p.tick_count} raised {type(exc).__name__}: {exc} (rolled "
                    "back: the state is as before it; its inputs wait for the next tick)"
                )
                for note in getattr(exc, "__notes__", ()):
                    self._say(f"  {note}")
                return False
            self._say(self._one_line(self.p.tick_count - 1))
        return True

    def _dump(self, name: str) -> None:
        if name in self.ir.lattices:
            self._say(f"lattice {name} = {getattr(self.p, name).value!r}")
            return
        view = getattr(self.p, name)
        rows = list(view)
        self._say(f"{self.ir.collections[name].kind} {name}: {len(rows)} rows")
        from blooml.lattices._display import text_table

        if rows:
            for line in text_table(view.columns, rows, total=len(rows), limit=len(rows)):
                self._say(line)

    # -- commands -------------------------------------------------------------------------------

    def emptyline(self) -> bool:
        return False

    def default(self, line: str) -> None:
        self._error(f"unknown command {line.split()[0]!r} (type help)")

    def do_insert(self, arg: str) -> None:
        """insert COLL ROW [ROW ...]: queue rows for the next tick, e.g.
        insert link ("a", "b", 1) ("b", "c", 2)    or, for a lattice variable, insert top lmax(3)"""
        self._change(arg, "insert")

    def do_delete(self, arg: str) -> None:
        """delete COLL ROW [ROW ...]: queue deletions from a table for the next tick."""
        self._change(arg, "delete")

    def _change(self, arg: str, what: str) -> None:
        name, _, rest = arg.strip().partition(" ")
        if name not in self._state_names():
            self._error(f"no collection or lattice variable {name!r} (state: lists them)")
            return
        try:
            rows = _literal_rows(rest, self.names)
        except (ValueError, SyntaxError, TypeError) as exc:
            self._error(f"cannot read the rows {rest.strip()!r}: {exc}")
            return
        target = getattr(self.p, name)
        try:
            if name in self.ir.lattices:
                if what == "delete":
                    self._error(f"{name} is a lattice variable: values only grow")
                    return
                for v in rows:
                    target.insert(v)
            else:
                getattr(target, what)([tuple(r) if isinstance(r, list) else r for r in rows])
        except Exception as exc:
            self._error(str(exc))
            return
        self._say(f"queued {len(rows)} {what}{'s' if len(rows) != 1 else ''} into {name}")

    def do_tick(self, arg: str) -> None:
        """tick [N]: run N ticks (default 1), printing one summary line per tick."""
        try:
            n = int(arg) if arg.strip() else 1
            if n < 0:
                raise ValueError
        except ValueError:
            self._error(f"tick takes a non-negative number of ticks, got {arg.strip()!r}")
            return
        self._run_ticks(n)

    def do_step(self, arg: str) -> None:
        """step: run one tick and show what it took in, what each rule derived, and sent."""
        if self._run_ticks(1):
            self.do_why(str(self.p.tick_count - 1))

    def do_why(self, arg: str) -> None:
        """why [N]: show tick N's inputs, derivations and messages (default: the last tick)."""
        try:
            tick = int(arg) if arg.strip() else self.p.tick_count - 1
        except ValueError:
            self._error(f"why takes a tick number, got {arg.strip()!r}")
            return
        evs = self._tick_events(tick)
        if tick < 0 or not evs:
            self._error(f"no tick {tick} has run (ticks run: {self.p.tick_count})")
            return
        rules = {r.index: r for r in self.ir.rules}
        for e in evs:
            kind = e["ev"]
            if kind == "input":
                self._say(f"  in   {e['coll']} {e['kind']} {e['n']}: {_rows(e)}")
            elif kind == "recv":
                self._say(f"  msg  {e['chan']} from {e['from'] or '?'}: {json.dumps(e['row'])}")
            elif kind == "derive":
                r = rules[e["rule"]]
                new = "" if e["new"] is None else f", {e['new']} new"
                self._say(f"  r{e['rule']:<3} [{r.where}] {r.head} {r.op}: {e['n']} rows{new}")
                self._say(f"         {_rows(e)}")
            elif kind == "send":
                self._say(f"  sent {e['chan']} to {e['to']}: {json.dumps(e['row'])}")
            elif kind == "error":
                self._say(f"  error {e['type']}: {e['message']} (rule {e['rule']})")
            elif kind == "rollback":
                self._say("  rolled back")

    def do_dump(self, arg: str) -> None:
        """dump [COLL ...]: print the rows of collections (all when none named)."""
        names = shlex.split(arg) or self._state_names()
        for name in names:
            if name not in self._state_names():
                self._error(f"no collection or lattice variable {name!r}")
                continue
            self._dump(name)

    def do_state(self, arg: str) -> None:
        """state: list the collections and lattice variables (lscollections in rebl)."""
        for info in self.ir.collections.values():
            n = len(list(getattr(self.p, info.name)))
            self._say(f"  {info.describe()}  ({n} rows)")
        for lat in self.ir.lattices.values():
            self._say(f"  lattice {lat.name} = {getattr(self.p, lat.name).value!r}")
        self._say(f"tick_count = {self.p.tick_count}")

    def do_rules(self, arg: str) -> None:
        """rules: print the program's rules by stratum, and the dependencies."""
        self._say(self.ir.format())

    def do_plot(self, arg: str) -> None:
        """plot [FILE]: draw the program with Graphviz (default program.svg)."""
        from blooml.errors import GraphvizNotFound
        from blooml.ir.dot import render

        out = Path(arg.strip() or "program.svg")
        dot = self.ir.to_dot()
        fmt = out.suffix.lstrip(".") or "svg"
        if fmt == "dot":
            out.write_text(dot, encoding="utf-8")
            self._say(f"wrote {out}")
            return
        try:
            out.write_bytes(render(dot, fmt))
        except GraphvizNotFound as exc:
            dot_path = out.with_suffix(".dot")
            dot_path.write_text(dot, encoding="utf-8")
            self._say(f"{exc}; wrote {dot_path} (render: dot -T{fmt} {dot_path} -o {out})")
            return
        except Exception as exc:
            self._error(f"cannot draw to {str(out)!r}: {exc}")
            return
        self._say(f"wrote {out}")

    def do_quit(self, arg: str) -> bool:
        """quit: leave the shell."""
        return True

    # rebl's names for the same commands
    do_lsrules = do_rules
    do_lscollections = do_state
    do_exit = do_quit
    do_EOF = do_quit  # cmd's name for the end of input


def _rows(e: dict[str, Any]) -> str:
    rows = ", ".join(json.dumps(r) for r in e["rows"])
    return rows + (f" ... {e['more']} more" if e.get("more") else "")


def run(ns: argparse.Namespace) -> int:
    """Run the shell on stdin/stdout; return the exit status (1 if a command failed)."""
    from blooml.bloom.program import Program
    from blooml.engine.trace import Tracer
    from blooml.errors import BloomlError

    try:
        cls = load_target(ns.target)
    except UsageError as exc:
        print(f"blooml {NAME}: error: {exc}", file=sys.stderr)
        return 2
    if not (isinstance(cls, type) and issubclass(cls, Program) and cls is not Program):
        print(f"blooml {NAME}: error: {ns.target} is not a Program subclass", file=sys.stderr)
        return 2
    try:
        program = cls(addr=ns.addr, trace=Tracer(io.StringIO(), limit=10))
    except (BloomlError, TypeError) as exc:
        print(f"blooml {NAME}: error: cannot create {cls.__qualname__}: {exc}", file=sys.stderr)
        return 2
    shell = Repl(program, stdin=sys.stdin, stdout=sys.stdout)
    try:
        shell.cmdloop()
    except KeyboardInterrupt:
        print()
    return shell.status
