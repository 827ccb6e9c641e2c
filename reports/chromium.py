"""Open a report in headless Chromium and measure its layout, through the DevTools protocol on a pipe
(``--remote-debugging-pipe``): no script in the page, no extra package, no port.

The page keeps its Content-Security-Policy (no script); the measurements are evaluated by the browser on
our behalf (``Runtime.evaluate``), which a page's CSP does not govern. Used by the report's browser tests
(validation/test_report.py) and by ``python -m reports.screenshots``.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Layout", "PageView", "open_page"]

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
         "--remote-debugging-pipe")
# Where things are, in CSS pixels from the top of the page; `wide`: tables and charts whose right edge passes
# the content column (body minus its padding), each as "<tag> <width>px".
MEASURE = """(() => {
  const body = document.body, root = document.documentElement, css = getComputedStyle(body);
  const column = body.getBoundingClientRect().right - parseFloat(css.paddingRight);
  const box = sel => { const e = document.querySelector(sel); if (!e) return null;
    const r = e.getBoundingClientRect(); return {top: r.top + scrollY, bottom: r.bottom + scrollY}; };
  const wide = [...document.querySelectorAll('table, svg')].filter(e => {
    const r = e.getBoundingClientRect(); return r.width > 0 && r.right > column + 1; })
    .map(e => e.tagName.toLowerCase() + ' ' + Math.round(e.getBoundingClientRect().width) + 'px'
              + (e.closest('section') ? ' in #' + e.closest('section').id : ''));
  return {scroll_width: root.scrollWidth, client_width: root.clientWidth, height: root.scrollHeight,
          verdict: box('#verdict'), chart: box('#speedup .charts'), wide: wide};
})()"""
OPEN_ALL = "document.querySelectorAll('details').forEach(d => { d.open = true; }); true"


@dataclass(frozen=True)
class Layout:
    scroll_width: int
    client_width: int
    height: int
    verdict: dict[str, float] | None
    chart: dict[str, float] | None
    wide: list[str]

    @property
    def scrolls_sideways(self) -> bool:
        return self.scroll_width > self.client_width


class _Pipe:
    """One DevTools connection: JSON messages ending in NUL, written to the browser's fd 3, read from its fd 4."""

    def __init__(self, chromium: str, profile: Path, timeout: float) -> None:
        to_browser_r, self._w = os.pipe()
        self._r, from_browser_w = os.pipe()
        # Moved above 9 (close-on-exec), then duplicated onto 3 and 4 in the child, where the browser looks.
        ends = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (to_browser_r, from_browser_w)]
        for fd in (to_browser_r, from_browser_w):
            os.close(fd)

        def onto_3_and_4() -> None:
            os.dup2(ends[0], 3)
            os.dup2(ends[1], 4)

        self.timeout = timeout
        # close_fds=False: every other descriptor of ours is close-on-exec already (PEP 446).
        self.proc = subprocess.Popen([chromium, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                     close_fds=False, preexec_fn=onto_3_and_4, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for fd in ends:
            os.close(fd)
        self._buf = b""
        self._next = 0
        self.events: list[dict[str, Any]] = []

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._r], [], [], left)[0]:
                raise TimeoutError("chromium did not answer on the DevTools pipe in time")
            chunk = os.read(self._r, 1 << 20)
            if not chunk:
                raise RuntimeError(f"chromium closed the DevTools pipe: {self.stderr_tail()}")
            self._buf += chunk
        message, self._buf = self._buf.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._w, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"DevTools {method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        for event in self.events:
            if event.get("method") == method:
                return event
        while True:
            event = self._read(deadline)
            self.events.append(event)
            if event.get("method") == method:
                return event

    def stderr_tail(self) -> str:
        if self.proc.poll() is None or self.proc.stderr is None:
            return "(chromium still running)"
        return self.proc.stderr.read().decode(errors="replace")[-2000:]

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                self.call("Browser.close")
        except (TimeoutError, RuntimeError, OSError):
            pass  # the browser is going anyway; it is killed below if it lingers
        finally:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            for fd in (self._r, self._w):
                os.close(fd)
            if self.proc.stderr is not None:
                self.proc.stderr.close()


class PageView:
    """A page loaded at a given window size; measure it, open its <details>, take a screenshot."""

    def __init__(self, pipe: _Pipe, session: str, width: int, height: int) -> None:
        self._pipe, self._session, self.width, self.height = pipe, session, width, height

    def _eval(self, expression: str) -> Any:
        result = self._pipe.call("Runtime.evaluate", self._session, expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"measuring the page failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def layout(self) -> Layout:
        return Layout(**self._eval(MEASURE))

    def open_all_details(self) -> None:
        self._eval(OPEN_ALL)

    def screenshot(self, path: Path, height: int | None = None) -> Path:
        clip = {"x": 0, "y": 0, "width": self.width, "height": height or self.height, "scale": 1}
        data = self._pipe.call("Page.captureScreenshot", self._session, format="png", clip=clip)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    @property
    def console(self) -> list[str]:
        """Console and log messages the page produced (a page with no script should produce none)."""
        out = []
        for e in self._pipe.events:
            if e.get("method") == "Runtime.consoleAPICalled":
                out.append(" ".join(str(a.get("value", a.get("description", ""))) for a in e["params"]["args"]))
            elif e.get("method") == "Log.entryAdded":
                out.append(f"{e['params']['entry'].get('level')}: {e['params']['entry'].get('text')}")
        return out


class open_page:  # noqa: N801 - used as a context manager: `with open_page(...) as view:`
    """``with open_page(chromium, page, profile=..., width=1400, height=1000) as view: view.layout()``"""

    def __init__(self, chromium: str, page: Path, *, profile: Path, width: int = 1400, height: int = 1000,
                 timeout: float = 60.0) -> None:
        self.args = (chromium, page, profile, width, height, timeout)
        self._pipe: _Pipe | None = None

    def __enter__(self) -> PageView:
        chromium, page, profile, width, height, timeout = self.args
        pipe = self._pipe = _Pipe(chromium, profile, timeout)
        target = pipe.call("Target.createTarget", url="about:blank")["targetId"]
        session = pipe.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for method in ("Page.enable", "Runtime.enable", "Log.enable"):
            pipe.call(method, session)
        pipe.call("Emulation.setDeviceMetricsOverride", session, width=width, height=height, deviceScaleFactor=1,
                  mobile=False)
        pipe.events.clear()
        pipe.call("Page.navigate", session, url=page.resolve().as_uri())
        pipe.wait_for("Page.loadEventFired")
        return PageView(pipe, session, width, height)

    def __exit__(self, *exc: object) -> None:
        if self._pipe is not None:
            self._pipe.close()
