"""The masked-diffusion training step reads nothing back from the device (issue #16: no host sync
per step): the scored slots' and real units' indices and "no padding" come from collation, the
mask generator's (seed, step) from a host mirror of its buffer. On CPU a sync cannot be seen, so
this looks for the ops that a host read dispatches (a tensor's value to Python, ``nonzero``'s
data-dependent size) in one training forward + backward; and the numbers equal the forward that
finds the same facts on the device."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from encoders.backbone import BackboneConfig
from encoders.bpe import BpeConfig, BpeEncoder, BpeTokenizer
from encoders.byte_baseline import ByteConfig, ByteEncoder

TINY = BackboneConfig(layers=1, dim=32, heads=2)
HOST_READS = {"aten._local_scalar_dense", "aten.nonzero", "aten.is_nonzero", "aten.item"}
PADDED = [b"some training text here, a longer window", b"and a short one"]
EVEN = [b"exactly twenty bytes", b"twenty more bytes!!!"]


class HostReads(TorchDispatchMode):
    """Records every dispatched op whose result the host must read from the device."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if str(func.overloadpacket) in HOST_READS:
            self.seen.append(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


def bytes_mdm() -> ByteEncoder:
    torch.manual_seed(0)
    return ByteEncoder(ByteConfig(objective="mdm"), TINY).train()


def bpe_mdm() -> BpeEncoder:
    torch.manual_seed(0)
    enc = BpeEncoder(BpeConfig(vocab_size=300, objective="mdm"), TINY)
    enc.tokenizer = BpeTokenizer.train([w for w in PADDED + EVEN] * 20, 300)
    return enc.train()


@pytest.mark.parametrize("make", [bytes_mdm, bpe_mdm], ids=["bytes", "bpe"])
@pytest.mark.parametrize("windows", [PADDED, EVEN], ids=["padded", "no-padding"])
def test_training_step_reads_nothing_from_the_device(make: Any, windows: list[bytes]) -> None:
    enc = make()
    enc(enc.collate(windows, [0] * len(windows)))  # first step: the rng mirror is filled here
    batch = enc.collate(windows, [0] * len(windows))
    with HostReads() as reads:
        out = enc(batch)
        out.nll.sum().backward()
    assert reads.seen == []


@pytest.mark.parametrize("make", [bytes_mdm, bpe_mdm], ids=["bytes", "bpe"])
def test_collation_facts_give_the_numbers_of_the_device_path(make: Any) -> None:
    # The same masks (same rng step), once with collation's indices and once found on the
    # device as before: bit-identical NELBO terms.
    a, b = make(), make()
    for windows in (PADDED, EVEN):
        x, y = a.collate(windows, [0, 0]), b.collate(windows, [0, 0])
        for k in ("scored_r", "scored_n", "real_b", "real_m"):
            del y.tensors[k]
        del y.meta["all_valid"]
        assert x.meta["all_valid"] == (windows is EVEN)
        assert torch.equal(a(x).nll, b(y).nll)


def test_the_rng_mirror_follows_a_loaded_checkpoint() -> None:
    enc = bytes_mdm()
    for _ in range(3):
        enc(enc.collate(PADDED, [0, 0]))
    assert enc._mdm_rng_host()[1] == 3 == int(enc.mdm_rng[1])
    state = {k: v.clone() for k, v in enc.state_dict().items()}
    state["mdm_rng"][1] = 1
    enc.load_state_dict(state)  # an in-place copy: the mirror must read the buffer again
    assert enc._mdm_rng_host()[1] == 1


def bpe_ar() -> BpeEncoder:
    torch.manual_seed(0)
    enc = BpeEncoder(BpeConfig(vocab_size=300), TINY)
    enc.tokenizer = BpeTokenizer.train([w for w in PADDED + EVEN] * 20, 300)
    return enc.train()


def bytes_ar() -> ByteEncoder:
    torch.manual_seed(0)
    return ByteEncoder(ByteConfig(), TINY).train()


@pytest.mark.parametrize("make", [bytes_ar, bpe_ar], ids=["bytes", "bpe"])
def test_an_autoregressive_step_on_a_padded_batch_reads_nothing_from_the_device(make: Any) -> None:
    # BPE's windows tokenize to different lengths, so its batch is padded; the causal backbone
    # gets no padding mask, and the scored positions come from collation (stepfloor).
    enc = make()
    enc(enc.collate(PADDED, [0, 5]))
    batch = enc.collate(PADDED, [0, 5])
    with HostReads() as reads:
        out = enc(batch)
        out.nll.sum().backward()
    assert reads.seen == []


def test_the_rng_mirror_rereads_after_a_write_through_data() -> None:
    # The distributed harness broadcasts rank 0's buffers through .data, which leaves the
    # version counter the mirror is keyed on; sync_parameters then calls mdm_rng_reread.
    enc = bytes_mdm()
    enc(enc.collate(PADDED, [0, 0]))
    seed = int(enc.mdm_rng[0])
    enc.mdm_rng.data.copy_(torch.tensor([7, 5]))
    assert enc._mdm_rng_host() == (seed, 1)  # stale: the write was not seen
    enc.mdm_rng_reread()
    assert enc._mdm_rng_host() == (7, 5)
