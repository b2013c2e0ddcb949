"""benchmarks/score_graphs.py on a CPU: its shape parser, and its direct timing of a backbone
forward in scoring's inference mode (the CUDA-graph half needs a GPU)."""

from __future__ import annotations

import pytest
import torch
from bench_script import load_benchmark

from encoders.backbone import Backbone, BackboneConfig

score_graphs = load_benchmark("score_graphs")


def test_parse_shapes_reads_batch_by_length() -> None:
    assert score_graphs.parse_shapes("64x1024, 256x384") == [(64, 1024), (256, 384)]


@pytest.mark.parametrize("bad", ["64", "64x", "x8", "0x8", "8x-1", "8y8"])
def test_parse_shapes_names_a_bad_item(bad: str) -> None:
    with pytest.raises(ValueError, match=f"'{bad}' is not BATCHxLENGTH"):
        score_graphs.parse_shapes(bad)


def test_measure_times_the_forward_on_cpu_and_leaves_graphs_out() -> None:
    model = Backbone(BackboneConfig(layers=1, dim=16, heads=2)).eval()
    r = score_graphs.measure(model, (2, 8), torch.device("cpu"), bf16=True, reps=2, warmup=1)
    assert r["direct_ms"] is not None and r["direct_ms"] > 0
    assert r["host_ms"] is not None and r["host_ms"] > 0
    assert r["graph_ms"] is None and r["saved_ms"] is None and r["max_abs_diff"] is None
    # scoring's mode: no autograd state is kept for the forward's output
    with score_graphs.scoring_mode(torch.device("cpu"), bf16=True):
        assert torch.is_inference_mode_enabled()
        assert model(torch.zeros(1, 4, 16)).dtype == torch.float32  # no autocast on a CPU


def test_prepare_compiles_the_blocks_or_the_whole_backbone() -> None:
    # lazily: nothing is traced here, only which modules hold a compiled call
    blocks, whole, eager = (Backbone(BackboneConfig(layers=2, dim=16, heads=2)) for _ in range(3))
    score_graphs.prepare(blocks, "blocks")
    score_graphs.prepare(whole, "whole")
    score_graphs.prepare(eager, "none")

    def compiled(m: torch.nn.Module) -> bool:
        return getattr(m, "_compiled_call_impl", None) is not None

    assert not compiled(blocks) and all(compiled(b) for b in blocks.blocks) and compiled(blocks.norm)
    assert compiled(whole) and not any(compiled(b) for b in whole.blocks) and not compiled(whole.norm)
    assert not whole.dynamic_shapes  # compile's own dynamic switch instead of the forward's marking
    assert not compiled(eager) and not any(compiled(b) for b in eager.blocks)
    with pytest.raises(ValueError, match="'graphs' is not one of blocks, whole, none"):
        score_graphs.prepare(eager, "graphs")
