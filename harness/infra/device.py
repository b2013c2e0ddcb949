"""The torch device a run uses (``--device``)."""

from __future__ import annotations

import torch

from harness.infra.accel import attention_backends


def pick_device(name: str) -> torch.device:
    """``auto``: CUDA where there is one, else the CPU; on CUDA the attention backends are chosen
    (``attention_backends``). A missing CUDA device is a one-line ``ValueError``."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device is available")
    device = torch.device(name)
    if device.type == "cuda":
        attention_backends()
    return device
