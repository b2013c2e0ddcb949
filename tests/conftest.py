"""Settings for the whole test suite."""

from __future__ import annotations

import os

# `tokbench run` warns on stderr when the machine is busier than its cores
# (harness.pipeline.preflight.load_warning); tests that assert "exactly one line on stderr" must not
# depend on what else runs beside them (a CI run failed on it). Inherited by subprocesses.
os.environ.setdefault("TOKBENCH_LOAD_WARNING", "0")
