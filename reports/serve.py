"""A report renderer in a process of its own, started before the results exist:

    python -m reports.serve PARENT_PID      # then one JSON line on stdin: {"run_dir": "..."}
                                            # (and optionally "options": {"n_boot": ..., ...})

It imports the report's libraries (pandas, scipy, matplotlib and its font cache) at once, says
``{"ready": true}``, and waits. Given a run directory it renders it (``render_run``) and answers
one JSON line: ``{"path": ..., "timings": {...}}`` (``render.LAST_TIMINGS``), or ``{"error":
..., "errno": ...}``; then it exits. It dies with the process that started it.

Why: ``tokbench run`` on a GPU rendered the standard suite's report in 15.4 s inside the run's
process, against 8.8 s for the same report rendered again in a fresh one, its imports not
counted (one H100, BENCHMARKS.md). Started while the run scores, the fresh process
has its imports done by the time the results are written. The protocol lines go to the original stdout; anything a library prints goes to
stderr.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

OPTIONS = ("n_boot", "n_perm", "seed", "svg", "processes")  # render_run's keywords a request may set


def main(argv: list[str]) -> int:
    from core.forkpool import die_with_parent

    die_with_parent(int(argv[0]))
    proto = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # a library's print must not corrupt the protocol

    def say(msg: dict[str, object]) -> None:
        proto.write(json.dumps(msg) + "\n")
        proto.flush()

    from reports import figures, render  # noqa: F401 - figures: pyplot and its font cache, now

    say({"ready": True})
    line = sys.stdin.readline()
    if not line.strip():
        return 0  # the run needed no report (an error, or the report switched off)
    req = json.loads(line)
    try:
        opts = {k: v for k, v in (req.get("options") or {}).items() if k in OPTIONS}
        path = render.render_run(Path(req["run_dir"]), **opts)
    except Exception as e:  # noqa: BLE001 - answered to the run, which keeps its results either way
        say({"error": f"{type(e).__name__}: {e}".splitlines()[0][:500], "errno": getattr(e, "errno", None)})
        return 1
    say({"path": str(path), "timings": render.LAST_TIMINGS})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
