"""The run's report rendered by a process started ahead (``reports.serve``), while the run scores.

    proc = ReportProcess.start()          # imports the report's libraries over there, now
    path, timings = proc.render(run_dir)  # later: the same files render_run writes in-process

``overlap.report_process``: true on, false off; auto: on when the run trains on a GPU (the case it
was measured for: the report in the run's process took 15.4 s against 8.8 s rendered again in a
fresh one, one H100, BENCHMARKS.md; on the 2-core CPU machine the extra interpreter
would compete with the run for the cores). The files are the same bytes either way
(tests/harness/overlap/test_report_process.py). If the process cannot start or dies, ``render`` raises
``ReportProcessFailed`` and the run renders in its own process, as before.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parents[2]  # the checkout: harness/overlap/ is two below it


class ReportProcessFailed(RuntimeError):
    """The report process is gone or answered nonsense: render in the run's process instead."""


def wanted(setting: Literal["auto"] | bool, device_type: str) -> bool:
    """Whether to render in a process of its own (module docstring): ``overlap.report_process``;
    under auto, on CUDA."""
    return device_type == "cuda" if setting == "auto" else bool(setting)


class ReportProcess:
    """A started ``python -m reports.serve`` (module docstring)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.busy = False  # a request sent and not answered: close() kills rather than waits

    @classmethod
    def start(cls) -> ReportProcess:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
        proc = subprocess.Popen([sys.executable, "-m", "reports.serve", str(os.getpid())], cwd=ROOT, env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8")
        return cls(proc)

    def _answer(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise ReportProcessFailed(f"the report process ended (exit code {self.proc.wait()})")
        try:
            msg = json.loads(line)
        except ValueError:
            raise ReportProcessFailed(f"the report process answered {line[:200]!r}") from None
        if not isinstance(msg, dict):
            raise ReportProcessFailed(f"the report process answered {line[:200]!r}")
        return msg

    def render(self, run_dir: Path, **options: Any) -> tuple[Path, dict[str, Any]]:
        """Render ``run_dir``'s report over there (``options``: ``render_run``'s keywords named in
        ``reports.serve.OPTIONS``): (report.html's path, ``LAST_TIMINGS``). An error
        of the rendering is raised here as ``OSError`` (with its errno: a full disk stays the
        user's to fix) or ``RuntimeError``; a dead process as ``ReportProcessFailed``."""
        try:
            if not self._answer().get("ready"):
                raise ReportProcessFailed("the report process did not start")
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps({"run_dir": str(Path(run_dir).resolve()), "options": options}) + "\n")
            self.proc.stdin.flush()
            self.busy = True
            msg = self._answer()
            self.busy = False
        except (BrokenPipeError, OSError) as e:
            raise ReportProcessFailed(f"the report process is gone ({type(e).__name__}: {e})") from None
        finally:
            self.close()
        if "error" in msg:
            if msg.get("errno") is not None:
                raise OSError(int(msg["errno"]), f"{msg['error']} (in the report process)")
            raise RuntimeError(f"{msg['error']} (in the report process)")
        if "path" not in msg:
            raise ReportProcessFailed(f"the report process answered {msg!r:.200}")
        return Path(msg["path"]), dict(msg.get("timings") or {})

    def close(self) -> None:
        """End the process: idle, by closing its input (no report is wanted); rendering (the run
        was interrupted meanwhile), by killing it."""
        if self.proc.poll() is None and self.busy:
            self.proc.kill()
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                self.proc.wait(timeout=10.0)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            if f is not None and not f.closed:
                f.close()

