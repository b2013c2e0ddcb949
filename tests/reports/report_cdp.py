"""A tiny Chrome DevTools Protocol client over ``--remote-debugging-pipe`` (no websocket library).

Chromium reads NUL-terminated JSON commands on fd 3 and writes responses/events on fd 4. We load
one page, record console errors, exceptions and every network request, and take a screenshot.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class PageReport:
    screenshot_png: bytes
    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)  # results of ``evaluate`` expressions


class _Pipe:
    def __init__(self, chromium: str, user_dir: str) -> None:
        cmd_r, self.cmd_w = os.pipe()
        self.resp_r, resp_w = os.pipe()

        def child_fds() -> None:  # runs in the child before exec: put the pipes on fds 3 and 4
            # via fds ≥ 10 first, so one dup2 cannot overwrite the other pipe end
            a = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 10)
            b = fcntl.fcntl(resp_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             f"--user-data-dir={user_dir}", "--no-first-run", "--no-default-browser-check",
             "--disable-extensions", "--hide-scrollbars", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=child_fds, pass_fds=(3, 4),  # close_fds runs after preexec_fn
        )
        os.close(cmd_r)
        os.close(resp_w)
        self.buf = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 30.0) -> dict[str, Any]:
        self.next_id += 1
        msg: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.cmd_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            m = self._read(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"CDP {method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method: str, timeout: float = 30.0) -> dict[str, Any]:
        for e in self.events:
            if e.get("method") == method:
                return e
        deadline = time.monotonic() + timeout
        while True:
            m = self._read(deadline)
            self.events.append(m)
            if m.get("method") == method:
                return m

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer from chromium")
            ready, _, _ = select.select([self.resp_r], [], [], left)
            if ready:
                chunk = os.read(self.resp_r, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed the debugging pipe")
                self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def close(self) -> None:
        try:
            os.write(self.cmd_w, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.cmd_w)
        os.close(self.resp_r)


def load_page(chromium: str, url: str, width: int = 1280, height: int = 2400,
              evaluate: dict[str, str] | None = None) -> PageReport:
    """Open ``url`` in headless Chromium; return a screenshot, what the page did, and the value
    of each JavaScript expression in ``evaluate`` (run in the loaded page, by value: JSON types).
    The report itself has no scripts; these only read its DOM."""
    with tempfile.TemporaryDirectory() as user_dir:
        pipe = _Pipe(chromium, user_dir)
        try:
            target = pipe.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            sid = pipe.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
                "sessionId"]
            for domain in ("Page", "Runtime", "Log", "Network"):
                pipe.send(f"{domain}.enable", session=sid)
            pipe.send("Emulation.setDeviceMetricsOverride",
                      {"width": width, "height": height, "deviceScaleFactor": 1,
                       "mobile": False}, session=sid)
            pipe.events.clear()
            pipe.send("Page.navigate", {"url": url}, session=sid)
            pipe.wait_event("Page.loadEventFired")
            shot = pipe.send("Page.captureScreenshot", {"format": "png"}, session=sid)
            report = PageReport(base64.b64decode(shot["data"]))
            for key, expr in (evaluate or {}).items():
                res = pipe.send("Runtime.evaluate", {"expression": expr, "returnByValue": True},
                                session=sid)
                if "exceptionDetails" in res:
                    raise RuntimeError(f"evaluate {key}: {res['exceptionDetails']}")
                report.values[key] = res["result"].get("value")
            for e in pipe.events:
                method, p = e.get("method"), e.get("params", {})
                if method == "Network.requestWillBeSent":
                    report.requests.append(p["request"]["url"])
                elif method == "Runtime.exceptionThrown":
                    report.console_errors.append(json.dumps(p.get("exceptionDetails"))[:300])
                elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                    report.console_errors.append(json.dumps(p.get("args"))[:300])
                elif method == "Log.entryAdded" and p["entry"].get("level") == "error":
                    report.console_errors.append(p["entry"].get("text", "")[:300])
            return report
        finally:
            pipe.close()
