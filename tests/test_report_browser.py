"""report.html in headless Chromium: not blank, no console error, no request leaving the file, the
recommended instance and every chart visible, printable.

Chromium is driven through the DevTools protocol over a pipe (`--remote-debugging-pipe`: JSON
messages separated by NUL bytes on file descriptors 3 and 4), which the standard library can speak,
so no websocket client or browser-automation package is needed. The protocol reports every request
the page makes (Network.requestWillBeSent) and every console message, exception and log entry,
which is what "no request leaves the file" and "no console errors" are about; `--dump-dom` and
stderr scraping would only show part of that. As a second guard, host names resolve to nothing
(`--host-resolver-rules`), so a request that slipped through could not reach anything either.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from test_report_fixtures import make_points

from sizer.report import build_context, write_context

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
WINDOW = (1280, 4000)
HOSTILE_NAME = "ptb-<script>alert(1)</script>-lstm"


class DevToolsPipe:
    """A headless Chromium and one page, spoken to through the DevTools protocol over a pipe."""

    def __init__(self, profile_dir: Path, timeout_s: float = 60.0):
        self.timeout_s = timeout_s
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # The browser expects the pipe on fds 3 and 4; move both ends high first so dup2 cannot clobber.
        child_r = os.dup2(to_browser_r, 100)
        child_w = os.dup2(from_browser_w, 101)

        def _wire_fds() -> None:
            os.dup2(child_r, 3)
            os.dup2(child_w, 4)

        self.stderr_path = profile_dir / "chromium.stderr"
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--host-resolver-rules=MAP * ~NOTFOUND",
                f"--user-data-dir={profile_dir / 'profile'}",
                f"--window-size={WINDOW[0]},{WINDOW[1]}",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
            pass_fds=(3, 4),
            preexec_fn=_wire_fds,
        )
        for fd in (to_browser_r, from_browser_w, child_r, child_w):
            os.close(fd)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.session = ""

    # -------------------------------------------------------------- protocol
    def _send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> int:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        return self._next_id

    def _read_until(self, predicate, timeout_s: float | None = None) -> dict[str, Any]:
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                message = json.loads(raw)
                if predicate(message):
                    return message
                if "method" in message:
                    self.events.append(message)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no answer from Chromium within {timeout_s or self.timeout_s:.0f} s")
            ready, _, _ = select.select([self._from_browser], [], [], min(left, 0.5))
            if ready:
                chunk = os.read(self._from_browser, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"Chromium closed the pipe: {self.stderr_path.read_text()[-2000:]}")
                self._buffer += chunk

    def call(self, method: str, params: dict[str, Any] | None = None, page: bool = True) -> dict[str, Any]:
        call_id = self._send(method, params, self.session if page else None)
        answer = self._read_until(lambda m: m.get("id") == call_id)
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer["result"]

    # -------------------------------------------------------------- page
    def open(self, url: str) -> None:
        target = self.call("Target.createTarget", {"url": "about:blank"}, page=False)
        self.session = self.call(
            "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}, page=False
        )["sessionId"]
        for domain in ("Page", "Network", "Runtime", "Log"):
            self.call(f"{domain}.enable")
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": WINDOW[0], "height": WINDOW[1], "deviceScaleFactor": 1, "mobile": False},
        )
        self.events.clear()
        self.call("Page.navigate", {"url": url})
        self._read_until(lambda m: m.get("method") == "Page.loadEventFired" and m.get("sessionId") == self.session)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def settle(self, seconds: float = 0.5) -> None:
        """Collect whatever events arrive for a moment (late requests, console messages)."""
        try:
            self._read_until(lambda m: False, timeout_s=seconds)
        except TimeoutError:
            pass

    def close(self) -> None:
        try:
            self.call("Browser.close", page=False)
            self.proc.wait(timeout=15)
        except (RuntimeError, TimeoutError, OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait(timeout=15)
        finally:
            for fd in (self._to_browser, self._from_browser):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self._stderr.close()


# ------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def report(tmp_path_factory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("report")
    points = (
        make_points("resnet50-train")
        + make_points("resnet50-train", decode="gpu", c=900.0, seed=5)
        + make_points(HOSTILE_NAME, G=20000.0, c=9000.0, s=0.1, k=0.01, b=0.001, unit="tokens/s", seed=3)
    )
    context = build_context(points, gpu="H100", command="sizer report --input points.csv --out out --gpu H100")
    paths = write_context(context, points, out)
    return {"context": context, "html": paths["report.html"], "dir": out}


@pytest.fixture(scope="module")
def page(report, tmp_path_factory):
    browser = DevToolsPipe(tmp_path_factory.mktemp("chromium"))
    try:
        browser.open(report["html"].resolve().as_uri())
        browser.settle()
        yield browser
    finally:
        browser.close()


@pytest.fixture(scope="module")
def screenshot(page, report):
    from PIL import Image

    data = page.call("Page.captureScreenshot", {"format": "png"})["data"]
    path = report["dir"] / "screenshot.png"
    path.write_bytes(base64.b64decode(data))
    return Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB")


# ------------------------------------------------------------------ tests
def test_no_request_leaves_the_file(page, report):
    requests = [e["params"]["request"]["url"] for e in page.events if e["method"] == "Network.requestWillBeSent"]
    assert requests, "the protocol reported no request at all: the page was not loaded through it"
    own = report["html"].resolve().as_uri()
    assert [u for u in requests if u != own and not u.startswith("data:")] == []
    references = page.evaluate(
        "Array.from(document.querySelectorAll('[src],[href],[srcset],link,iframe,object,embed'))"
        ".map(e => e.getAttribute('src') || e.getAttribute('href') || e.getAttribute('srcset') || e.tagName)"
    )
    assert all(r.startswith("#") for r in references), references


def test_no_console_errors_and_no_script(page):
    problems = []
    for event in page.events:
        method, params = event["method"], event["params"]
        if method == "Runtime.exceptionThrown":
            problems.append(params["exceptionDetails"].get("text"))
        elif method == "Runtime.consoleAPICalled" and params["type"] in ("error", "warning", "assert"):
            problems.append(params["args"])
        elif method == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
            problems.append(params["entry"]["text"])
    assert problems == []
    # The hostile workload name was escaped: it shows as text and made no element.
    assert page.evaluate("document.querySelectorAll('script').length") == 0
    assert page.evaluate(f"document.body.innerText.includes({json.dumps(HOSTILE_NAME)})")


def _visible_js(selector: str) -> str:
    return (
        f"Array.from(document.querySelectorAll({json.dumps(selector)})).map(e => {{"
        " const r = e.getBoundingClientRect(); const s = getComputedStyle(e);"
        " return {id: e.id || (e.closest('[id]') || {}).id, x: r.x + scrollX, y: r.y + scrollY, w: r.width, h: r.height,"
        " shown: s.visibility === 'visible' && s.display !== 'none' && parseFloat(s.opacity) > 0}; })"
    )


def test_recommended_instances_are_visible(page, report):
    chosen = [wl["recommendation"]["chosen"] for wl in report["context"]["workloads"]]
    assert all(chosen)
    rows = page.evaluate(
        "Array.from(document.querySelectorAll('table.summary tbody tr')).map(r => "
        "({text: r.innerText, h: r.getBoundingClientRect().height}))"
    )
    assert len(rows) == len(chosen)
    for row, option in zip(rows, chosen):
        assert option["instance_type"] in row["text"] and row["h"] > 10
    boxes = page.evaluate(_visible_js("table.summary .inst"))
    assert len(boxes) == len(chosen) and all(b["shown"] and b["w"] > 20 and b["h"] > 8 for b in boxes)


def test_every_chart_is_visible_and_drawn(page, report, screenshot):
    expected = sum(3 for wl in report["context"]["workloads"] if wl["fitted"])
    charts = page.evaluate(_visible_js("figure.chart svg"))
    assert len(charts) == expected
    for chart in charts:
        assert chart["shown"] and chart["w"] > 250 and chart["h"] > 180, chart
    # Text stayed text: every chart has a title and axis labels the page can read.
    labels = page.evaluate("Array.from(document.querySelectorAll('figure.chart svg')).map(s => s.textContent)")
    for text in labels:
        assert "throughput" in text or "measured" in text
    # The pixels: the first charts that fit in the window are drawn in the disk-class colours.
    drawn = 0
    for chart in charts:
        if chart["y"] + chart["h"] > WINDOW[1]:
            continue
        box = screenshot.crop((int(chart["x"]), int(chart["y"]), int(chart["x"] + chart["w"]), int(chart["y"] + chart["h"])))
        colours = box.getcolors(maxcolors=1 << 20)
        non_white = sum(n for n, c in colours if sum(c) < 720)
        assert len(colours) > 50 and non_white > 0.02 * box.width * box.height, chart
        drawn += 1
    assert drawn >= 2


def test_screenshot_is_not_blank(screenshot):
    assert screenshot.size == WINDOW
    colours = screenshot.getcolors(maxcolors=1 << 22)
    assert len(colours) > 500
    non_white = sum(n for n, c in colours if sum(c) < 720)
    assert non_white > 0.03 * WINDOW[0] * WINDOW[1]


def test_layout_fits_the_window_and_prints(page):
    # Nothing wider than the window (a reader never scrolls sideways) ...
    assert page.evaluate("document.documentElement.scrollWidth") <= WINDOW[0]
    # ... and the print stylesheet gives a multi-page PDF with every section.
    page.call("Emulation.setEmulatedMedia", {"media": "print"})
    assert page.evaluate("getComputedStyle(document.querySelector('nav.toc')).display") == "none"
    pdf = base64.b64decode(page.call("Page.printToPDF", {"printBackground": True})["data"])
    page.call("Emulation.setEmulatedMedia", {"media": ""})
    pages = len(re.findall(rb"/Type\s*/Page[^s]", pdf))
    assert pdf.startswith(b"%PDF") and pages >= 3, pages
