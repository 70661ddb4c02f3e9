"""Regenerate the pictures of docs/tools.md: ``python docs/make_images.py``.

Needs Graphviz (``apt-get install graphviz``, ``pip install graphviz``) for the plots and
headless Chromium with its driver (``apt-get install chromium chromium-driver``, ``pip install
selenium``) for the screenshots. Writes into ``docs/img/``:

- ``plot_cart.svg``: ``blooml plot examples/shopping_cart.py:DisorderlyCart``
- ``plot_cycle.svg``: ``blooml plot`` on a program that cannot be stratified
- ``cart_trace.html``: ``blooml trace html`` on a client and a server of the shopping cart
- ``trace_viewer.png``: that page in Chromium after a click on the server's tick 3
- ``notebook_repr.png``: a program instance's ``_repr_html_`` as Jupyter shows it
- ``trace_show.txt``, ``repl_session.txt``: the terminal output shown in docs/tools.md
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
IMG = ROOT / "docs" / "img"

CYCLE_SRC = '''\
from blooml import Program, bloom, scratch, table


class Orders(Program):
    """Accept an order unless it is cancelled; cancel what was accepted: a cycle through notin."""

    order = table(["id"])
    cancelled = scratch(["id"])
    accepted = scratch(["id"])

    @bloom
    def rules(self):
        self.accepted <= self.order.notin(self.cancelled)
        self.cancelled <= self.accepted
'''


def blooml(*args: str, stdin: str | None = None) -> str:
    """Run ``python -m blooml ARGS`` from the repository root; return its output."""
    res = subprocess.run(
        [sys.executable, "-m", "blooml", *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if res.returncode not in (0, 1):
        raise SystemExit(f"blooml {' '.join(args)} failed:\n{res.stderr}")
    return res.stdout


def example(name: str) -> ModuleType:
    """``examples/<name>.py`` as a module."""
    mod_name = f"docs_example_{name}"
    if mod_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(mod_name, ROOT / "examples" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        sys.modules[mod_name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[mod_name])
    return sys.modules[mod_name]


def cart_traces(folder: Path) -> list[str]:
    """Trace one shopping-cart session (client and server, messages delayed) into ``folder``."""
    cart = example("shopping_cart")
    from blooml import LocalNetwork

    net = LocalNetwork(seed=3, max_delay=2)
    files = [str(folder / "client.jsonl"), str(folder / "server.jsonl")]
    client = cart.CartClient(addr="client", network=net, trace=files[0])
    cart.DisorderlyCart(addr="server", network=net, trace=files[1])
    client.client_checkout.insert([("server", "client", "s1", 3)])
    for r, item, q in [("r1", "apple", 2), ("r2", "pear", 1), ("r3", "apple", -1)]:
        client.client_action.insert([("server", "client", "s1", r, item, q)])
        net.tick()
    net.tick(6)
    return files


def chromium():  # type: ignore[no-untyped-def]
    """A headless Chromium (Debian's, driven by selenium)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or "chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1300,720"):
        opts.add_argument(arg)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)


def main() -> None:
    """Write every picture."""
    IMG.mkdir(parents=True, exist_ok=True)
    blooml("plot", "examples/shopping_cart.py:DisorderlyCart", "-o", str(IMG / "plot_cart.svg"))
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "orders.py"
        src.write_text(CYCLE_SRC)
        blooml("plot", f"{src}:Orders", "-o", str(IMG / "plot_cycle.svg"))
        files = cart_traces(Path(tmp))
        show = blooml("trace", "show", *files, "--ticks", "5")
        (IMG / "trace_show.txt").write_text(show)
        page = IMG / "cart_trace.html"
        blooml("trace", "html", *files, "-o", str(page), "--title", "shopping cart: one session")
    script = (
        'insert link ("a", "b", 1) ("b", "c", 2)\nstep\ninsert link ("a", "c", 5)\n'
        "tick\ndump best\nwhy 1\n"
    )
    (IMG / "repl_session.txt").write_text(_session_text(script))
    driver = chromium()
    try:
        from selenium.webdriver.common.by import By

        driver.get(page.as_uri())
        driver.find_element(By.CSS_SELECTOR, 'circle[data-node="server"][data-tick="3"]').click()
        driver.save_screenshot(str(IMG / "trace_viewer.png"))
        repr_page = Path(tempfile.gettempdir()) / "blooml_notebook_repr.html"
        repr_page.write_text(_notebook_page())
        driver.set_window_size(760, 620)
        driver.get(repr_page.as_uri())
        driver.save_screenshot(str(IMG / "notebook_repr.png"))
    finally:
        driver.quit()
    for f in sorted(IMG.iterdir()):
        print(f"wrote {f.relative_to(ROOT)}")


def _session_text(script: str) -> str:
    """The repl's output with each command shown after a prompt, as typed in a terminal."""
    from blooml.cli.repl import Repl
    from blooml.engine.trace import Tracer

    mod = example("shortest_paths")

    buf = io.StringIO()
    shell = Repl(mod.Paths(trace=Tracer(io.StringIO(), limit=10)), stdin=io.StringIO(), stdout=buf)
    buf.write(shell.intro + "\n")
    for cmd in script.splitlines():
        buf.write(f"blooml> {cmd}\n")
        shell.onecmd(cmd)
    return buf.getvalue()


def _notebook_page() -> str:
    mod = example("shortest_paths")
    p = mod.Paths()
    p.link.insert(mod.ROADS[:4])
    with contextlib.redirect_stdout(io.StringIO()):
        p.tick()
    style = (
        "body{font-family:Helvetica,Arial,sans-serif;font-size:13px;margin:16px}"
        "table{border-collapse:collapse;margin:4px 0 8px}td,th{border:1px solid #ddd;"
        "padding:2px 8px;font-family:monospace}th{background:#f0f0f0}"
        ".in{color:#303f9f;font-family:monospace;margin-bottom:6px}"
    )
    return (
        f"<html><head><meta charset='utf-8'><style>{style}</style></head><body>"
        f"<div class='in'>In [3]: p</div>{p._repr_html_()}</body></html>"
    )


if __name__ == "__main__":
    main()
