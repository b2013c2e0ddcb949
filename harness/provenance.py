"""Facts about the software and machine, for run.json."""

from __future__ import annotations

import importlib.metadata as md
import os
import platform
import subprocess
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
    root = Path(__file__).resolve().parent.parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5)
        if sha.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=5)
        return sha.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def hardware(device: torch.device) -> dict[str, Any]:
    import torch  # here, not at import: `tokbench --version` must not load torch

    info: dict[str, Any] = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "device": str(device),
    }
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
        info["cuda"] = torch.version.cuda
    return info
