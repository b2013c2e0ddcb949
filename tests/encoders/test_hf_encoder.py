"""The hf encoder against plain ``transformers``: BPB equal to a direct computation on the same
windows for three tokenizer families (byte-level BPE, byte-fallback BPE with a "▁" prefix, one
token per byte), clean_target scoring exactly the continuation when a token would straddle the
boundary, units that tile the bytes, batching, bf16, the causality probe, and the refusals
(no transformers, a hub id offline). Models are made here from configs (random weights, a
tokenizer trained on a few kB), saved with ``save_pretrained`` and loaded through the encoder."""

from __future__ import annotations

import importlib.util
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from harness.score.items import plan_clean_target, plan_full, score_items

transformers = pytest.importorskip("transformers")

from encoders.hf import HfConfig, HfEncoder  # noqa: E402
from encoders.hf.tokenize import char_byte_offsets, units_from_spans  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CPU = torch.device("cpu")
TEXT = ("The quick brown fox jumps over the lazy dög — 我能吞下玻璃. def f(x):\n    return x + 1  # ok\n"
        "Zwölf Boxkämpfer jagen Viktor quer über den großen Deich.  Two  spaces, tabs\tand a tail ")


def _tool():
    spec = importlib.util.spec_from_file_location("make_tiny_hf_model", ROOT / "tools" / "make_tiny_hf_model.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tool = _tool()
    root = tmp_path_factory.mktemp("hf")
    return {f: tool.build(root / f, f, seed=1) for f in ("gpt2", "llama", "bytes")}


def reference(folder: Path):
    """(model, encode(text, start) -> ids, bos): the checkpoint as plain transformers loads it,
    and its tokenizer — for a continuation, the llama tokenizer without its "▁" prefix, built
    here by hand (not by the encoder's JSON rewrite)."""
    from tokenizers import Tokenizer, normalizers

    tok = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    cont = Tokenizer.from_file(str(folder / "tokenizer.json"))
    if "llama" in folder.name:
        cont.normalizer = normalizers.Replace(" ", "▁")

    def encode(text: str, start: bool) -> list[int]:
        if start:
            return tok(text, add_special_tokens=False).input_ids
        return cont.encode(text, add_special_tokens=False).ids

    return model, encode, tok.bos_token_id


def direct_nll(model, bos: int, ctx: list[int], tgt: list[int]) -> float:
    """Σ cross-entropy (nats) of ``tgt`` after BOS + ``ctx``, by the model's own forward."""
    x = torch.tensor([[bos, *ctx, *tgt]])
    with torch.no_grad():
        logits = model(input_ids=x).logits[0, len(ctx) : len(ctx) + len(tgt)]
    return float(torch.nn.functional.cross_entropy(logits.float(), torch.tensor(tgt), reduction="sum"))


@pytest.mark.parametrize("family", ["gpt2", "llama", "bytes"])
def test_bpb_equals_transformers_on_the_same_windows(models: dict[str, Path], family: str) -> None:
    folder = models[family]
    enc = HfEncoder(HfConfig(path=str(folder)))
    model, encode, bos = reference(folder)
    data = TEXT.encode()
    for context, stride in ((4096, 4096), (96, 40)):  # one window; rolling windows with context
        item = plan_full(data, context, stride)
        [ds] = score_items(enc, [item], CPU, batch_windows=3)
        want = 0.0
        for w in item.windows:
            win = data[w.start : w.end]
            s = w.score_from
            ctx = encode(win[:s].decode(), True) if s else []
            want += direct_nll(model, bos, ctx, encode(win[s:].decode(), s == 0))
        assert ds.nll == pytest.approx(want, rel=1e-5, abs=1e-4)
        assert len(ds.byte_nll) == len(data) and ds.byte_nll.sum() == pytest.approx(ds.nll, rel=1e-9)
        bpb = ds.nll / (math.log(2) * len(data))
        assert bpb == pytest.approx(want / (math.log(2) * len(data)), rel=1e-5)


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_clean_target_scores_the_continuation_when_a_token_straddles(models: dict[str, Path], family: str) -> None:
    folder = models[family]
    enc = HfEncoder(HfConfig(path=str(folder)))
    model, encode, bos = reference(folder)
    prefix, cont = "The quick brown fox jum", "ps over the lazy dög."
    whole = enc.tokenizer.encode((prefix + cont).encode(), start=True)
    ends = whole.unit_end
    cut = len(prefix.encode())
    # tokenized whole, one unit runs across the cut: the case the rule is for
    assert cut not in set(ends.tolist()) and any(a < cut < b for a, b in zip(np.r_[0, ends[:-1]], ends))
    item = plan_clean_target(prefix.encode(), cont.encode(), 4096, 1000)
    [ds] = score_items(enc, [item], CPU)
    # the continuation's bytes, and only those, are scored: context and target tokenized apart
    assert len(ds.byte_nll) == len(cont.encode())
    want = direct_nll(model, bos, encode(prefix, True), encode(cont, False))
    assert ds.nll == pytest.approx(want, rel=1e-5)
    # the context's tokens are the prefix's alone, whatever follows it
    ctx = torch.from_numpy(enc.tokenizer.encode(prefix.encode(), start=True).ids)
    batch = enc.collate([(prefix + "XYZ").encode(), (prefix + cont).encode()], [cut, cut])
    for i in range(2):
        assert torch.equal(batch["inputs"][i, 1 : 1 + len(ctx)], ctx)
        assert bool((batch["targets"][i, : len(ctx)] < 0).all()) and int(batch["targets"][i, len(ctx)]) >= 0


def test_units_group_tokens_that_share_bytes_by_hand() -> None:
    # tokens: [0,2) [2,3) [2,3) (two halves of one character) ∅ [3,5) [6,7) (a byte no token reports)
    a = np.array([0, 2, 2, 9, 3, 6])
    b = np.array([2, 3, 3, 9, 5, 7])
    unit, ends = units_from_spans(a, b, 7)
    assert unit.tolist() == [0, 1, 1, 2, 2, 3] and ends.tolist() == [2, 3, 5, 7]
    # trailing empty token: joins the last unit, which ends at the end of the bytes
    unit, ends = units_from_spans(np.array([0, 3]), np.array([3, 3]), 3)
    assert unit.tolist() == [0, 0] and ends.tolist() == [3]
    assert char_byte_offsets("aö我\udcff").tolist() == [0, 1, 3, 6, 7]


@pytest.mark.parametrize("family", ["gpt2", "llama", "bytes"])
def test_units_tile_multibyte_and_invalid_bytes(models: dict[str, Path], family: str) -> None:
    enc = HfEncoder(HfConfig(path=str(models[family])))
    data = "ö我 x".encode() + b"\xff\xfe ok \xc3"
    for start in (True, False):
        p = enc.tokenizer.encode(data, start)
        assert p.unit_end[-1] == len(data) and bool((np.diff(np.r_[0, p.unit_end]) > 0).all())
        assert p.unit[0] == 0 and bool((np.diff(p.unit) >= 0).all()) and p.unit[-1] == len(p.unit_end) - 1
    [ds] = score_items(enc, [plan_full(data, 64, 64)], CPU)
    assert len(ds.byte_nll) == len(data) and np.isfinite(ds.byte_nll).all()


def test_batched_equals_one_window_at_a_time_and_bf16_is_close(models: dict[str, Path]) -> None:
    folder = models["llama"]
    enc = HfEncoder(HfConfig(path=str(folder)))
    docs = [TEXT[i:].encode() for i in range(0, 60, 7)]
    items = [plan_full(d, 80, 30) for d in docs]
    together = score_items(enc, items, CPU, batch_windows=16)
    alone = [score_items(enc, [it], CPU, batch_windows=1)[0] for it in items]
    for x, y in zip(together, alone):
        np.testing.assert_allclose(x.byte_nll, y.byte_nll, rtol=1e-4, atol=1e-5)
    half = HfEncoder(HfConfig(path=str(folder), dtype="bfloat16"))
    assert next(half.model.parameters()).dtype == torch.bfloat16
    bf = score_items(half, items, CPU, batch_windows=16)
    tot32, tot16 = sum(d.nll for d in together), sum(d.nll for d in bf)
    assert tot16 == pytest.approx(tot32, rel=0.02)


class Peeking(HfEncoder):
    """A deliberately leaky wrapper: position n sees input n + 1, i.e. its own target token."""

    def logits(self, inputs: torch.Tensor) -> torch.Tensor:
        return super().logits(torch.roll(inputs, -1, dims=1))


def test_causality_probe_passes_the_model_and_refuses_a_leaky_wrapper(models: dict[str, Path]) -> None:
    from harness.score.pretrained import admit

    cfg = HfConfig(path=str(models["gpt2"]))
    meta = admit(HfEncoder(cfg), "hf", "k", CPU, 0, log=lambda s: None)  # the run's loading step
    assert meta["causality"]["ok"] and meta["causality"]["max_abs_dlogp"] <= 1e-5
    assert meta["trained_elsewhere"] and meta["flops_per_byte_train"] is None and "train" not in meta
    with pytest.raises(ValueError, match=r"'leaky' .* refused: the causality probe failed \(max \|Δ log p\| = "):
        admit(Peeking(cfg), "leaky", "k", CPU, 0, log=lambda s: None)


def test_hub_id_offline_and_missing_folder_are_one_line_refusals(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="never downloads") as e:
        HfConfig(path="tokbench-test/no-such-model")
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="folder not found"):
        HfConfig(path=str(tmp_path / "nope"))
    with pytest.raises(ValueError, match="no config.json"):
        HfConfig(path=str(tmp_path))


BLOCK = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "transformers" or name.startswith("transformers."):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None
sys.meta_path.insert(0, Block())
from harness.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_without_transformers_the_encoder_refuses_with_how_to_install(tmp_path: Path, models: dict[str, Path]) -> None:
    suite = tmp_path / "s.yaml"
    suite.write_text(f"""\
name: s
seeds: [0]
data:
  train: {{paths: [{tmp_path / 't.txt'}]}}
  eval: [{{name: e, paths: [{tmp_path / 't.txt'}]}}]
encoders:
  - {{name: hf, path: {models['gpt2']}}}
""")
    (tmp_path / "t.txt").write_text(TEXT)
    r = subprocess.run([sys.executable, "-c", BLOCK, "validate", str(suite)], capture_output=True, text=True,
                       cwd=ROOT, timeout=120)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'tokbench[hf]'" in lines[0] and "s.yaml" in lines[0]
