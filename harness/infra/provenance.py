"""Facts about the software and machine, for run.json."""

from __future__ import annotations

import functools
import importlib.metadata as md
import os
import platform
import statistics
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

PACKAGES = ["tokbench", "torch", "triton", "tiktoken", "tokenizers", "nlpaug", "numpy", "scipy", "pandas",
            "seaborn", "matplotlib", "pyyaml", "jinja2", "rapidfuzz", "morfessor", "spylls"]


def tokbench_version() -> str:
    try:
        return md.version("tokbench")
    except md.PackageNotFoundError:
        return "0.0.0+unknown"


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for p in PACKAGES:
        try:
            out[p] = md.version(p)
        except md.PackageNotFoundError:
            out[p] = None
    return out


def git_sha() -> str | None:
    """The commit of the tokbench checkout, with '-dirty' if it has local changes."""
    root = Path(__file__).resolve().parents[2]  # the checkout (harness/infra/ is two below)
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5)
        if sha.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=5)
        return sha.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str | None:
    """The CPU's model name as Linux's ``/proc/cpuinfo`` gives it (first ``model name`` line), or
    None where that file is missing or has no such line (other systems, some ARM kernels)."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "model name" and value.strip():
            return value.strip()
    return None


def host_pace_us(reps: int = 5, n: int = 20_000) -> float:
    """Median microseconds one thread of this process takes for a fixed pure-Python workload
    (``n`` dict updates and list appends, ``reps`` repetitions): a yardstick of the host's
    single-thread pace, which sets the speed of everything host-bound in a run (launching
    kernels, collating, compiling). Two runs on different machines with the same GPU can
    differ by it (BENCHMARKS.md); it says nothing about the GPU. A few ms in all."""
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        d: dict[int, int] = {}
        out: list[int] = []
        for i in range(n):
            d[i & 1023] = d.get(i & 1023, 0) + i
            out.append(i ^ (i >> 3))
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


@functools.cache
def host_facts() -> dict[str, Any]:
    """Platform, CPU model, ``host_pace_us`` and core counts (``cpu_usable``: the cores this
    process may run on), measured once per process: run.json is rewritten after every model,
    and the pace is read at the first write, near the run's start, not again beside its work."""
    usable = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(),
        "cpu_model": cpu_model(),
        "host_pace_us": round(host_pace_us(), 1),
        "cpu_count": os.cpu_count(),
        "cpu_usable": len(usable) if usable is not None else os.cpu_count(),
    }


def hardware(device: torch.device) -> dict[str, Any]:
    """The machine a run ran on: ``host_facts()`` (the CPU and its single-thread yardstick),
    torch's threads and the GPU."""
    import torch  # here, not at import: `tokbench --version` must not load torch

    info: dict[str, Any] = {**host_facts(), "torch_threads": torch.get_num_threads(), "device": str(device)}
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
        info["cuda"] = torch.version.cuda
    return info
