"""Compiled graphs that trace ``sdpa_kernel`` come from torch.compile's disk cache in a second
process (``harness.infra.accel.cacheable_attention_graphs``): under the "fixed" cuDNN mode every
compiled graph with attention inside holds its helpers, and AOTAutograd bypassed the cache for
each of them, so the compile-ahead process's work on those graphs was redone by the run.

Each child process compiles one tiny block (inductor's C++ backend on the CPU, private empty
caches), scores with it and takes one training step: three children, about a minute on 2 cores."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.infra.accel import SDPA_KERNEL_HELPERS, cacheable_attention_graphs, compile_backbones

ROOT = Path(__file__).resolve().parents[3]

CHILD = r'''
import json, sys
import torch
from torch._dynamo.utils import counters
import torch._inductor.config as inductor_config
from encoders import backbone
from encoders.backbone import Backbone, BackboneConfig
from harness.infra.accel import compile_backbones

backbone.CUDNN_FIXED = True  # what attention_backends() sets on CUDA: sdpa_kernel in the graphs
torch.manual_seed(0)
m = Backbone(BackboneConfig(layers=1, dim=32, heads=2))
compile_backbones(torch.nn.Sequential(m))
if sys.argv[1] == "unmarked":  # the code before the marks, to show what they change
    inductor_config.unsafe_marked_cacheable_functions = {}
x = torch.randn(2, 24, 32)
with torch.inference_mode():
    scored = m(x)  # a scoring forward: attention in the graph, cuDNN left out (sdpa_kernel)
m(x).square().mean().backward()  # a training step at the first length
grad = m.blocks[0].attn.qkv.weight.grad
print(json.dumps({"aot": dict(counters["aot_autograd"]), "scored": scored.flatten().tolist(),
                  "grad": grad.flatten().tolist()}))
'''


def _child(tmp_path: Path, cache: str, mode: str) -> dict:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {k: v for k, v in os.environ.items() if k != "TORCH_LOGS"}
    env.update(PYTHONPATH=str(ROOT), TORCHINDUCTOR_CACHE_DIR=str(tmp_path / cache / "inductor"),
               TRITON_CACHE_DIR=str(tmp_path / cache / "triton"))
    p = subprocess.run([sys.executable, str(script), mode], env=env, capture_output=True, text=True,
                       timeout=600, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_the_marks_are_set_once_by_compile_backbones() -> None:
    import torch._inductor.config as inductor_config

    compile_backbones(torch.nn.Sequential(torch.nn.Linear(2, 2)))  # no backbone: the marks all the same
    marked = inductor_config.unsafe_marked_cacheable_functions
    assert all(marked[name] == torch.__version__ for name in SDPA_KERNEL_HELPERS)
    before = dict(marked)
    cacheable_attention_graphs()
    assert inductor_config.unsafe_marked_cacheable_functions == before


@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                    reason="inductor on CPU needs a C++ compiler")
def test_graphs_with_sdpa_kernel_come_from_the_cache_in_a_second_process(tmp_path: Path) -> None:
    first = _child(tmp_path, "marked", "marked")
    assert first["aot"].get("autograd_cache_bypass", 0) == 0
    assert first["aot"].get("autograd_cache_saved", 0) >= 2  # the scoring graph and the training graph
    second = _child(tmp_path, "marked", "marked")  # the run after the compile-ahead process
    assert second["aot"].get("autograd_cache_bypass", 0) == 0 and second["aot"].get("autograd_cache_miss", 0) == 0
    assert second["aot"].get("autograd_cache_hit", 0) >= 2
    # a graph from the cache computes what the freshly compiled one did
    assert second["scored"] == first["scored"] and second["grad"] == first["grad"]
    unmarked = _child(tmp_path, "unmarked", "unmarked")
    assert unmarked["aot"].get("autograd_cache_bypass", 0) >= 2  # what the marks change
    assert unmarked["scored"] == first["scored"] and unmarked["grad"] == first["grad"]


ORDER_CHILD = r'''
import json, sys
import torch
from harness.infra.accel import cache_counts, compile_backbones
from encoders.backbone import Backbone, BackboneConfig

out = {}
for dim in map(int, sys.argv[1].split(",")):  # backbones of these widths, one after the other
    torch.manual_seed(0)
    m = Backbone(BackboneConfig(layers=1, dim=dim, heads=2))
    compile_backbones(torch.nn.Sequential(m))
    before = cache_counts()
    m(torch.randn(4, 32, dim)).square().mean().backward()  # a training step
    with torch.inference_mode():
        m(torch.randn(4, 32, dim))  # a scoring forward
    after = cache_counts()
    out[dim] = {k: after[k] - before[k] for k in after}
print(json.dumps(out))
'''


@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                    reason="inductor on CPU needs a C++ compiler")
def test_a_graph_does_not_depend_on_the_widths_compiled_before_it(tmp_path: Path) -> None:
    """A process that compiled a 32-wide backbone alone (a compile-ahead process whose first
    model it is: with two processes, each starts on another model than the run) serves a
    process that compiled a 16-wide one first (the run): the 32-wide graphs are the same
    whatever width the process met before, so all of them come from the cache."""
    script = tmp_path / "order.py"
    script.write_text(ORDER_CHILD)
    env = {k: v for k, v in os.environ.items() if k != "TORCH_LOGS"}
    env.update(PYTHONPATH=str(ROOT), TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"),
               TRITON_CACHE_DIR=str(tmp_path / "triton"))

    def child(dims: str) -> dict:
        p = subprocess.run([sys.executable, str(script), dims], env=env, capture_output=True, text=True,
                           timeout=600, cwd=tmp_path)
        assert p.returncode == 0, p.stderr[-3000:]
        return json.loads(p.stdout.strip().splitlines()[-1])

    ahead = child("32")
    assert ahead["32"]["fxgraph_cache_miss"] > 0 and ahead["32"]["fxgraph_cache_hit"] == 0
    run = child("16,32")
    assert run["16"]["fxgraph_cache_miss"] > 0  # nobody compiled 16 before
    assert run["32"]["fxgraph_cache_miss"] == 0 and run["32"]["fxgraph_cache_hit"] == ahead["32"]["fxgraph_cache_miss"]
