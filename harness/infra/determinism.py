"""``budget.deterministic``: the same numbers from the same suite and seed on a GPU, run after run.

On the CPU the run is deterministic as it stands. On a GPU two trainings of the same seed
differed: by up to 1.2e-2 BPB on clean cells and 0.4 BPB on the far out-of-distribution ones
(BENCHMARKS.md). The sources are kernels whose order of summation changes from run
to run (atomic adds: index and scatter backwards, some attention backwards), cuBLAS's
workspace-dependent reductions, and choices made by timing — Triton autotuning in Inductor and in
FuzzyTok's kernels, cuDNN's benchmark mode — where a different winner sums in a different order.

``deterministic_kernels(True)`` turns every one of those off for the process: torch's deterministic
algorithms (which also put Inductor in its deterministic mode: no timed config choices, eager
fallbacks for scatter-like ops), cuDNN's deterministic kernels without benchmark mode, cuBLAS's
fixed workspace (``CUBLAS_WORKSPACE_CONFIG``, read when a cuBLAS handle is created, so before the
first GEMM), no cuDNN attention (its backward is nondeterministic and torch has no deterministic
option for it; flash and memory-efficient attention take a deterministic backward under the
switch), and FuzzyTok's first config the device runs instead of a timed one
(``encoders.fuzzytok.kernels`` reads ``torch.are_deterministic_algorithms_enabled()`` when it
tunes a key). An op with no deterministic implementation is then a one-line error naming it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch

import encoders.backbone as backbone
from harness.infra.accel import attention_backends

CUBLAS_ENV = "CUBLAS_WORKSPACE_CONFIG"
CUBLAS_FIXED = ":4096:8"  # one of the two settings cuBLAS documents as deterministic
# torch's message for an op without a deterministic implementation (``alertNotDeterministic``)
NOT_DETERMINISTIC = "does not have a deterministic implementation"


class NotDeterministic(ValueError):
    """An op the run needs has no deterministic implementation (a user setting that cannot be
    honoured: a ValueError, so the CLI prints it as one line, exit code 2)."""


def _state() -> tuple[bool, bool, bool, bool, str | None, bool, bool]:
    return (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
            torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark, os.environ.get(CUBLAS_ENV),
            torch.backends.cuda.cudnn_sdp_enabled(), backbone.CUDNN_FIXED)


def set_deterministic_kernels() -> None:
    """Turn deterministic kernels on for this process (see the module docstring); a
    ``CUBLAS_WORKSPACE_CONFIG`` the user set is kept."""
    os.environ.setdefault(CUBLAS_ENV, CUBLAS_FIXED)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    attention_backends()  # its rule: no cuDNN attention under deterministic algorithms


def error_line(e: BaseException) -> str | None:
    """The one-line error for ``e`` when it is torch's refusal of a nondeterministic op, else None."""
    text = str(e)
    if NOT_DETERMINISTIC not in text:
        return None
    first = text.strip().splitlines()[0]
    op = first.split(NOT_DETERMINISTIC)[0].strip().rstrip(",") or "an operation"
    return (f"budget.deterministic: {op} has no deterministic implementation in torch {torch.__version__}; "
            f"set budget.deterministic: false to run it (finished models and cells are kept)")


@contextlib.contextmanager
def deterministic_kernels(on: bool) -> Iterator[None]:
    """Deterministic kernels inside the block when ``on`` (the process's previous settings come
    back after it); torch's refusal of an op is raised as ``NotDeterministic``."""
    if not on:
        yield
        return
    before = _state()
    set_deterministic_kernels()
    try:
        yield
    except RuntimeError as e:
        line = error_line(e)
        if line is None:
            raise
        raise NotDeterministic(line) from e
    finally:
        algorithms, warn_only, cudnn_det, cudnn_bench, cublas, cudnn_sdp, cudnn_fixed = before
        torch.use_deterministic_algorithms(algorithms, warn_only=warn_only)
        torch.backends.cudnn.deterministic = cudnn_det
        torch.backends.cudnn.benchmark = cudnn_bench
        torch.backends.cuda.enable_cudnn_sdp(cudnn_sdp)
        backbone.CUDNN_FIXED = cudnn_fixed
        if cublas is None:
            os.environ.pop(CUBLAS_ENV, None)
        else:
            os.environ[CUBLAS_ENV] = cublas
