"""Render a page in headless Chromium and read it back: a screenshot and a JS value.

Chromium's one-shot ``--screenshot`` takes its picture before a Bokeh server
page has opened its websocket and drawn its document, so this drives the
browser over the DevTools protocol instead (a websocket, with tornado's
client): load the page, wait until a JavaScript expression says the page has
drawn, then capture the screen.  Everything stays on localhost.
"""

import asyncio
import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request

CHROMIUM = "/usr/bin/chromium"

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars", "--remote-debugging-port=0",
         "--remote-debugging-address=127.0.0.1"]


def chromium_missing():
    """Why the browser tests cannot run, or None."""
    if not os.path.exists(CHROMIUM):
        return (f"{CHROMIUM} is absent: install the Debian package 'chromium' "
                "(.ci/run does) to render the dashboard page")
    return None


def render(url, *, ready, timeout=60.0, size=(1400, 1400), settle=1.0):
    """Load ``url``; once the JS expression ``ready`` is truthy, return ``(png, value)``.

    ``value`` is the last value of ``ready``; raises ``TimeoutError`` if it
    never became truthy.
    """
    async def run():
        async with _Chromium(size, timeout) as browser:
            await browser.navigate(url)
            value = await browser.wait_for(ready, timeout)
            await asyncio.sleep(settle)
            return await browser.screenshot(), value

    return asyncio.run(run())


def watch(url, expression, *, until, interval=0.2, timeout=120.0, size=(1400, 1400)):
    """Keep ``url`` open and sample the JS ``expression`` until ``until(value)`` is true.

    Returns the values sampled, one every ``interval`` seconds.
    """
    async def run():
        values = []
        async with _Chromium(size, timeout) as browser:
            await browser.navigate(url)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                values.append(await browser.evaluate(expression))
                if until(values[-1]):
                    return values
                await asyncio.sleep(interval)
        raise TimeoutError(f"still watching {url} after {timeout}s: {values[-5:]}")

    return asyncio.run(run())


class _Chromium:
    """Headless Chromium with one page, driven over the DevTools protocol."""

    def __init__(self, size, timeout):
        self.size = size
        self.timeout = timeout

    async def __aenter__(self):
        from tornado.websocket import websocket_connect

        self.profile = tempfile.mkdtemp(prefix="daskelastic-chromium-")
        self.proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={self.profile}",
                                      f"--window-size={self.size[0]},{self.size[1]}",
                                      "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            port = await _devtools_port(self.profile, self.proc,
                                        deadline=time.monotonic() + self.timeout)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list") as r:
                targets = json.load(r)
            page = next(t for t in targets if t["type"] == "page")
            self.ws = await websocket_connect(page["webSocketDebuggerUrl"],
                                              max_message_size=256 * 2**20)
            self.devtools = _DevTools(self.ws)
            await self.devtools.call("Page.enable")
        except BaseException:
            self._stop()
            raise
        return self

    async def __aexit__(self, *exc):
        self.ws.close()
        self._stop()

    def _stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    async def navigate(self, url):
        await self.devtools.call("Page.navigate", url=url)

    async def evaluate(self, expression):
        result = await self.devtools.call("Runtime.evaluate", expression=expression,
                                          returnByValue=True)
        return result.get("result", {}).get("value")

    async def wait_for(self, expression, timeout):
        deadline = time.monotonic() + timeout
        value = None
        while time.monotonic() < deadline:
            await asyncio.sleep(0.25)
            value = await self.evaluate(expression)
            if value:
                return value
        raise TimeoutError(f"not ready after {timeout}s: {expression} = {value!r}")

    async def screenshot(self):
        shot = await self.devtools.call("Page.captureScreenshot", format="png")
        return base64.b64decode(shot["data"])


async def _devtools_port(profile, proc, deadline):
    path = os.path.join(profile, "DevToolsActivePort")
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"chromium exited with code {proc.returncode}")
        if os.path.exists(path):
            with open(path) as f:
                lines = f.read().split()
            if len(lines) >= 2:
                return int(lines[0])
        await asyncio.sleep(0.05)
    raise TimeoutError("chromium did not open its DevTools port")


class _DevTools:
    def __init__(self, ws):
        self.ws = ws
        self.n = 0

    async def call(self, method, **params):
        self.n += 1
        self.ws.write_message(json.dumps({"id": self.n, "method": method, "params": params}))
        while True:
            raw = await self.ws.read_message()
            if raw is None:
                raise ConnectionError("the DevTools connection closed")
            msg = json.loads(raw)
            if msg.get("id") == self.n:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})


def count_colour(png, rgb, tolerance=8):
    """Pixels of ``png`` within ``tolerance`` of colour ``rgb`` (a hex string or tuple)."""
    import io

    import numpy as np
    from PIL import Image

    if isinstance(rgb, str):
        rgb = tuple(int(rgb.lstrip("#")[i:i + 2], 16) for i in (0, 2, 4))
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=int)
    return int((np.abs(pixels - np.array(rgb)).max(axis=2) <= tolerance).sum())
