"""FuzzyTok's Triton conv kernels compiled ahead of time for an H200 (sm_90a), on CPU: no spills,
TMA / cp.async pipelining and wgmma in the PTX (``benchmarks/fuzzytok_aot.py``, C = 256, K = 3).

Every autotune config of ``_conv_kernel``, ``_conv_tma_kernel`` and ``_conv_dw_kernel`` is compiled
for the epilogues of the default paths: forward MODE 0, 1 (layer), 4 (layer, saving the
pre-activation); input gradient MODE 0 and 5 (residual add and the layer below's act' gradient);
dW with the bias gradient (HAS_DB). A config that spilled registers would run far slower on the
GPU; one that did not compile (or needed too much shared memory) would be dropped by the
autotuner without notice. The compiles run in a subprocess because the kernels must be defined
with ``TRITON_INTERPRET=0`` (real JITFunctions and the GPU config lists), while the other kernel
tests in this process define them under the interpreter.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
# Found without importing triton here (this process's kernel tests configure it for the interpreter).
_TRITON = importlib.util.find_spec("triton")
PTXAS = Path(_TRITON.origin).parent / "backends" / "nvidia" / "bin" / "ptxas" if _TRITON else None

# (MODE, DIR) checked: what ops.py launches on the recompute=false path and for plain convs.
MODES = ((0, -1), (1, -1), (4, -1), (0, 1), (5, 1))

_CHILD = f"""
import json, sys
sys.path.insert(0, "benchmarks")
import fuzzytok_aot as a
jobs = a.make_jobs((256,), (3,), modes={MODES!r}, has_db=(True,))
out = dict(configs={{k: a.configs(k, 256) for k in a.KERNELS}}, results=a.run_jobs(jobs, workers=2, echo=False))
open(sys.argv[1], "w").write(json.dumps(out))
"""


@pytest.mark.slow
def test_fuzzytok_kernels_compile_for_sm90_without_spills(tmp_path: Path) -> None:
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: benchmarks/bench_fuzzytok.py runs the kernels themselves")
    if PTXAS is None or not os.access(PTXAS, os.X_OK):
        pytest.skip(f"no ptxas bundled with triton at {PTXAS}")
    out = tmp_path / "aot.json"
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(out)], cwd=ROOT, capture_output=True, text=True,
                          env=dict(os.environ, TRITON_INTERPRET="0"), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    results = data["results"]

    def tag(r: dict) -> str:
        return f"{r['kernel']} {r['config']} mode {r['mode']} dir {r['dir']} has_db {r['has_db']}"

    # Every GPU config of every kernel that C = 256 keeps was compiled (the GPU lists, not the
    # interpreter's one; the lists of small channel counts are pruned at C = 256).
    for kernel, cfgs in data["configs"].items():
        assert len(cfgs) > 1, kernel
        seen = {tuple(r["cfg"]) for r in results if r["kernel"] == kernel}
        assert seen == {tuple(c) for c in cfgs}, kernel  # C = 256: no TMA config is pruned
    assert len(results) == len(MODES) * (len(data["configs"]["ptr"]) + len(data["configs"]["tma"])) + len(
        data["configs"]["dw"])

    for r in results:
        assert r["error"] is None, f"{tag(r)}: {r['error']}"
        assert r["spill"] == 0, f"{tag(r)}: {r['spill']} bytes of register spills"
        assert r["wgmma"] > 0, f"{tag(r)}: no wgmma"
        if r["kernel"] == "tma":
            assert r["tma_load"] > 0, f"{tag(r)}: no TMA loads"
        else:  # pointer loads: pipelined through cp.async into shared memory
            assert r["cp_async"] > 0, f"{tag(r)}: loads not pipelined (no cp.async)"
