"""The HTML space-time viewer in a real browser: headless Chromium opens a generated page,
clicks a tick and checks the panel; the screenshot is kept under ``tests/artifacts/``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from _cart import cart_traces

from blooml.cli import main

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
CHROMEDRIVER = shutil.which("chromedriver")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _driver():  # type: ignore[no-untyped-def]
    """A headless Chromium driven by selenium, or a skip (outside CI only) saying why."""
    missing = []
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("selenium (pip install selenium; in the test extra)")
    if not (CHROMEDRIVER and CHROMIUM):
        missing.append("chromium and chromium-driver (apt-get install chromium chromium-driver)")
    if missing:
        if os.environ.get("CI") or os.environ.get("BLOOML_REQUIRE_TOOLS"):
            pytest.fail("the browser test cannot run in CI: missing " + "; ".join(missing))
        pytest.skip("browser test needs " + "; ".join(missing))
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        opts.add_argument(arg)
    opts.add_argument("--window-size=1400,900")
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


def test_viewer_in_headless_chromium(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files, _ = cart_traces(tmp_path)
    page = tmp_path / "trace.html"
    assert main(["trace", "html", *files, "-o", str(page)]) == 0
    text = page.read_text()
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in text and "<link" not in text and " src=" not in text
    driver = _driver()
    try:
        from selenium.webdriver.common.by import By

        driver.get(page.as_uri())
        ticks = driver.find_elements(By.CSS_SELECTOR, "circle.tick")
        assert len(ticks) == 18
        arrows = driver.find_elements(By.CSS_SELECTOR, "line.msg")
        assert len(arrows) >= 5
        # the server's tick 3 took an action and sent the response
        tick = driver.find_element(By.CSS_SELECTOR, 'circle[data-node="server"][data-tick="3"]')
        tick.click()
        detail = driver.find_element(By.ID, "detail").text
        assert "server tick 3" in detail
        assert "response_msg <~" in detail and "messages sent" in detail
        assert "action_msg from client" in detail
        assert "sel" in (tick.get_attribute("class") or "")
        ARTIFACTS.mkdir(exist_ok=True)
        shot = ARTIFACTS / "trace_viewer.png"
        assert driver.save_screenshot(str(shot))
        with capsys.disabled():
            print(f"\nscreenshot of the trace viewer: {shot}")
        assert shot.stat().st_size > 10_000
    finally:
        driver.quit()


def test_viewer_shows_a_rolled_back_tick(tmp_path: Path) -> None:
    from blooml import Program, bloom, table

    class Divide(Program):
        num = table(["x"])
        out = table(["y"])
        div = 0

        @bloom
        def rules(self):
            self.out <= self.num.map(lambda r: (r.x // self.div,))

    f = tmp_path / "div.jsonl"
    p = Divide(addr="calc", trace=str(f))
    p.num.insert([(4,), (8,)])
    with pytest.raises(ZeroDivisionError):
        p.tick()
    p.div = 2  # the retry of tick 0 takes the same rows and commits
    p.tick()
    page = tmp_path / "div.html"
    assert main(["trace", "html", str(f), "-o", str(page)]) == 0
    driver = _driver()
    try:
        from selenium.webdriver.common.by import By

        driver.get(page.as_uri())
        failed = driver.find_element(By.CSS_SELECTOR, 'circle[data-tick="0"][data-attempt="0"]')
        assert "err" in (failed.get_attribute("class") or "")
        failed.click()
        detail = driver.find_element(By.ID, "detail").text
        assert "calc tick 0" in detail and "rolled back" in detail
        assert "ZeroDivisionError: integer division or modulo by zero (rule 0, " in detail
        retry = driver.find_element(By.CSS_SELECTOR, 'circle[data-tick="0"][data-attempt="1"]')
        retry.click()
        detail = driver.find_element(By.ID, "detail").text
        assert "calc tick 0 (attempt 2)" in detail and "committed" in detail
        assert "r0 out <=" in detail
    finally:
        driver.quit()
