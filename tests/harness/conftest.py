"""The harness tests sit in one folder per layer of harness/ (bench/: benchmark scripts, cli/: end to
end through the command line). Their shared helpers (``_procs``, ``bench_script``) sit here, and a
test imports another folder's test module by name (``from test_run import make_suite``), so this
folder and every folder below it go on sys.path. Test files have no ``__init__.py`` (pytest imports
each by its base name), so a base name is used once under tests/ (pytest refuses a second one)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for folder in [HERE, *sorted(p for p in HERE.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))]:
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
