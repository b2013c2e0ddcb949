"""``tokbench run SUITE --nproc N``: start torchrun for the user (one process per GPU; on a
machine without CUDA, N CPU processes on gloo) and hold the run directory's lock meanwhile.

    launch(["run", "suites/smoke.yaml", "--out", "runs/x"], nproc=2, run_dir=Path("runs/x"))

The same ranks can be started by hand (multi-node: torchrun's rendezvous flags, see
docs/distributed.md); then rank 0 takes the lock itself.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

# Set in every process the launcher starts (and by ``init`` for a bare torchrun): NVLink
# multicast (NVLS / symmetric-memory multicast) is off on the lent machines (device KINDS.md).
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}
# The launcher holds the run directory's lock and tells its ranks so (they must not take it).
LOCK_HELD_ENV = "TOKBENCH_RUN_LOCK_HELD"


@contextlib.contextmanager
def run_lock(root: Path, log: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold the run directory's exclusive lock (``harness.infra.lock.RunLock``, the lock every
    one-process run takes) for the block; RunLocked (a ValueError, one line) when another live
    process has it."""
    from harness.infra.lock import RunLock

    with RunLock(root, log=log):
        yield


def strip_nproc(argv: list[str]) -> list[str]:
    """``argv`` without ``--nproc N`` / ``--nproc=N`` (the ranks must not launch again)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--nproc":
            skip = True
        elif not a.startswith("--nproc="):
            out.append(a)
    return out


def torchrun_command(argv: list[str], nproc: int) -> list[str]:
    """The torchrun command line of the ranks: one node, ``nproc`` processes, a free port."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
            "-m", "harness.cli", *strip_nproc(argv)]


def rank_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The ranks' environment: NVLink multicast off, the lock marked as held by the launcher,
    and this checkout importable (the ranks run ``-m harness.cli``)."""
    env = dict(os.environ if base is None else base)
    env.update(MULTICAST_OFF)
    env[LOCK_HELD_ENV] = "1"
    root = str(Path(__file__).resolve().parents[2])  # the checkout (harness/pipeline/ is two below)
    env["PYTHONPATH"] = os.pathsep.join([root, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    return env


def launch(argv: list[str], nproc: int, run_dir: Path, log: Callable[[str], None] | None = None) -> int:
    """Run ``tokbench <argv>`` as ``nproc`` torchrun ranks while holding ``run_dir``'s lock;
    returns torchrun's exit code (a killed run resumes with the same command)."""
    if nproc < 1:
        raise ValueError(f"--nproc {nproc}: expected a positive number of processes")
    with run_lock(run_dir, log):
        # The ranks must not outlive the lock holder: torchrun gets SIGTERM (and stops its ranks)
        # if this process dies, and on Ctrl-C we wait for it to finish stopping them.
        proc = subprocess.Popen(torchrun_command(argv, nproc), env=rank_env(),
                                preexec_fn=_term_with_parent if sys.platform.startswith("linux") else None)
        try:
            return proc.wait()
        except KeyboardInterrupt:
            proc.send_signal(signal.SIGTERM)
            proc.wait()
            raise


def _term_with_parent() -> None:
    """In the child before exec: SIGTERM when the parent (the launcher) dies (Linux prctl)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass
