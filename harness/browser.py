"""A real browser for the UI tests and the screenshot script: Debian's Chromium, headless, driven over the
Chrome DevTools Protocol (a websocket, spoken with aiohttp's client).

It loads pages, follows links and submits forms as a person would (clicks run in the page), reads the
rendered DOM, lists the cookies the browser keeps and saves screenshots. Nothing is mocked: the page comes
from the running owner, and the browser applies its Content-Security-Policy, cookies and escaping.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

CHROMIUM = "/usr/bin/chromium"


class BrowserError(RuntimeError):
    pass


class Browser:
    """One headless Chromium with one tab. Use as a context manager; every call waits for its answer."""

    def __init__(self, width: int = 1400, height: int = 900) -> None:
        if not os.access(CHROMIUM, os.X_OK):
            raise BrowserError(f"{CHROMIUM} is missing: run `make test-system-deps`")
        self.width, self.height = width, height
        self._loop = asyncio.new_event_loop()
        self._profile = Path(tempfile.mkdtemp(prefix="ui-chromium-"))
        self._proc: subprocess.Popen[bytes] | None = None
        self._session: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._ids = itertools.count(1)
        self._events: list[dict[str, Any]] = []

    # -- lifecycle --------------------------------------------------------------------------------------

    def __enter__(self) -> Browser:
        self._proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-dev-shm-usage", "--hide-scrollbars", f"--window-size={self.width},{self.height}",
             f"--user-data-dir={self._profile}", "--remote-debugging-port=0", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            self._run(self._connect())
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        async def shut() -> None:
            if self._ws is not None:
                await self._ws.close()
            if self._session is not None:
                await self._session.close()
        try:
            self._run(shut())
        finally:
            if self._proc is not None and self._proc.poll() is None:
                self._proc.terminate()
                try:
                    self._proc.wait(10)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
            self._loop.close()
            shutil.rmtree(self._profile, ignore_errors=True)

    async def _connect(self) -> None:
        port_file = self._profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not port_file.exists() or not port_file.read_text().strip():
            if time.monotonic() > deadline or (self._proc is not None and self._proc.poll() is not None):
                raise BrowserError("chromium did not open its DevTools port")
            await asyncio.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        self._session = aiohttp.ClientSession()
        async with self._session.get(f"http://127.0.0.1:{port}/json/list") as r:
            targets = await r.json()
        page = next(t for t in targets if t.get("type") == "page")
        self._ws = await self._session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)
        await self._send("Page.enable")
        await self._send("Emulation.setDeviceMetricsOverride",
                         width=self.width, height=self.height, deviceScaleFactor=1, mobile=False)

    def _run(self, coro: Any) -> Any:
        return self._loop.run_until_complete(asyncio.wait_for(coro, 90))

    async def _send(self, method: str, **params: Any) -> dict[str, Any]:
        assert self._ws is not None
        msg_id = next(self._ids)
        await self._ws.send_str(json.dumps({"id": msg_id, "method": method, "params": params}))
        while True:
            msg = json.loads((await self._ws.receive()).data)
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise BrowserError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self._events.append(msg)

    async def _wait_event(self, method: str) -> dict[str, Any]:
        assert self._ws is not None
        for i, e in enumerate(self._events):
            if e["method"] == method:
                return self._events.pop(i)
        while True:
            msg = json.loads((await self._ws.receive()).data)
            if msg.get("method") == method:
                return msg
            if "method" in msg:
                self._events.append(msg)

    # -- what a person does -----------------------------------------------------------------------------

    def open(self, url: str) -> None:
        """Load ``url`` and wait until it has loaded."""
        async def go() -> None:
            self._events.clear()
            result = await self._send("Page.navigate", url=url)
            if result.get("errorText"):
                raise BrowserError(f"{url}: {result['errorText']}")
            await self._wait_event("Page.loadEventFired")
        self._run(go())

    def _navigating(self, expression: str) -> None:
        async def go() -> None:
            self._events.clear()
            await self._eval(expression)
            await self._wait_event("Page.loadEventFired")
        self._run(go())

    def click(self, selector: str) -> None:
        """Click the element ``selector`` finds (a link or a button) and wait for the page it leads to."""
        self._navigating(f"document.querySelector({json.dumps(selector)}).click()")

    def submit(self, form_selector: str, fields: dict[str, str]) -> None:
        """Fill a form's fields and press its submit button, then wait for the page it leads to."""
        sets = "".join(f"f.elements[{json.dumps(k)}].value = {json.dumps(v)};" for k, v in fields.items())
        self._navigating(f"(() => {{ const f = document.querySelector({json.dumps(form_selector)}); {sets}"
                         f" f.querySelector('button[type=submit], button').click(); }})()")

    async def _eval(self, expression: str) -> Any:
        res = await self._send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in res:
            raise BrowserError(f"{expression[:80]}: {res['exceptionDetails'].get('text')}")
        return res.get("result", {}).get("value")

    def eval(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (run by the browser's debugger, which the page's
        Content-Security-Policy does not govern)."""
        return self._run(self._eval(expression))

    def url(self) -> str:
        return str(self.eval("location.href"))

    def text(self, selector: str = "body") -> str:
        return str(self.eval(f"(document.querySelector({json.dumps(selector)}) || {{}}).innerText || ''"))

    def count(self, selector: str) -> int:
        return int(self.eval(f"document.querySelectorAll({json.dumps(selector)}).length"))

    def attrs(self, selector: str, attribute: str) -> list[str]:
        return list(self.eval(f"Array.from(document.querySelectorAll({json.dumps(selector)}))"
                              f".map(e => e.getAttribute({json.dumps(attribute)}))"))

    def html(self) -> str:
        return str(self.eval("document.documentElement.outerHTML"))

    def cookies(self) -> list[dict[str, Any]]:
        return list(self._run(self._send("Network.getAllCookies"))["cookies"])

    def clear_cookies(self) -> None:
        self._run(self._send("Network.clearBrowserCookies"))

    def screenshot(self, path: Path) -> None:
        """A PNG of the whole page (not only the window)."""
        async def shoot() -> None:
            metrics = await self._send("Page.getLayoutMetrics")
            size = metrics.get("cssContentSize") or metrics["contentSize"]
            height = min(int(size["height"]) + 1, 6000)
            await self._send("Emulation.setDeviceMetricsOverride", width=self.width, height=height,
                             deviceScaleFactor=1, mobile=False)
            shot = await self._send("Page.captureScreenshot", format="png")
            await self._send("Emulation.setDeviceMetricsOverride", width=self.width, height=self.height,
                             deviceScaleFactor=1, mobile=False)
            path.write_bytes(base64.b64decode(shot["data"]))
        self._run(shoot())
