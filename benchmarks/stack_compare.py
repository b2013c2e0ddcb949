"""Compare a stacked sweep (``scaling.stack``) with the same points trained one at a time, from the
two runs' logs (the ``[model] ... FLOPs in Xs, final loss Y bpb`` lines): per rung, the stack's
wall (its last member's seconds: a member's seconds count from the stack's start) against the sum
of the same points' loop seconds alone, with the ratio, TFLOP/s and % of a GEMM rate; then the
final training losses of the points both runs finished (bytes read must be equal).

    python benchmarks/stack_compare.py STACK_LOG ALONE_LOG [ALONE_LOG ...] [--gemm TFLOPS]

Several ALONE_LOGs: the parts of one run that was killed and resumed (a resumed point loads from
the model cache and prints no training line, so each point is counted once). Only rungs whose
every stacked member finished are compared.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

LINE = re.compile(r"\[model\] (\S+@\S+):(\S+) seed (\d+): ([\d,]+) bytes, (\S+) FLOPs in ([\d.]+)s, "
                  r"final loss ([\d.]+) bpb")
PLAN = re.compile(r"\[model\] (\S+@\S+):(\S+) seed (\d+): \S+ FLOPs = ~[\d,]+ bytes, (\d+) steps")
STACK = re.compile(r"\[scaling\] (\S+):(\S+) seed (\d+): (\d+) points as one stacked model")


def points(text: str) -> dict[tuple[str, str, str], tuple[int, float, float, float]]:
    """(encoder@budget, rung, seed) -> (bytes, FLOPs, seconds, final loss in BPB)."""
    out = {}
    for m in LINE.finditer(text):
        out[(m.group(1), m.group(2), m.group(3))] = (int(m.group(4).replace(",", "")), float(m.group(5)),
                                                     float(m.group(6)), float(m.group(7)))
    return out


def stacks(text: str) -> dict[tuple[str, str, str], int]:
    """(encoder, rung, seed) -> the stack's size when it started."""
    return {(m.group(1), m.group(2), m.group(3)): int(m.group(4)) for m in STACK.finditer(text)}


def step_ms(text: str, members: list[tuple[str, str, str]], seconds: dict[tuple[str, str, str], float]) -> str:
    """ms a step while K points were in the stack: between one member's end and the next, from
    the planned steps (the plan lines) and the members' seconds since the stack's start."""
    planned = {(m.group(1), m.group(2), m.group(3)): int(m.group(4)) for m in PLAN.finditer(text)}
    if any(key not in planned for key in members):
        return ""
    order = sorted(members, key=lambda key: planned[key])
    parts, prev_steps, prev_s = [], 0, 0.0
    for i, key in enumerate(order):
        n, t = planned[key] - prev_steps, seconds[key] - prev_s
        if n > 0 and t > 0:
            parts.append(f"K={len(order) - i} {1e3 * t / n:.2f}")
        prev_steps, prev_s = planned[key], seconds[key]
    return "; ms a step at " + ", ".join(parts)


def compare(stack_text: str, alone_texts: list[str], gemm_tflops: float | None = None) -> str:
    stacked, sizes = points(stack_text), stacks(stack_text)
    alone: dict[tuple[str, str, str], tuple[int, float, float, float]] = {}
    for t in alone_texts:
        alone.update(points(t))
    rows, tot_wall, tot_alone, tot_flops = [], 0.0, 0.0, 0.0
    for (enc, rung, seed), k in sizes.items():
        members = {key: v for key, v in stacked.items() if key[0].split("@")[0] == enc and key[1] == rung
                   and key[2] == seed}
        if len(members) < k or any(key not in alone for key in members):
            continue  # cut before its last member finished, or a point missing from the other run
        wall = max(v[2] for v in members.values())
        solo = sum(alone[key][2] for key in members)
        flops = sum(v[1] for v in members.values())
        tot_wall, tot_alone, tot_flops = tot_wall + wall, tot_alone + solo, tot_flops + flops
        rows.append(f"  {enc}:{rung} seed {seed}: {k} points, stack {wall:.1f} s, alone {solo:.1f} s, "
                    f"{solo / wall:.2f}x" + step_ms(stack_text, list(members), {q: v[2] for q, v in members.items()}))
    if not rows:
        return "no rung finished in both runs"

    def rate(f: float, s: float) -> str:
        pct = f" = {100 * f / s / 1e12 / gemm_tflops:.1f} % of {gemm_tflops:.0f}" if gemm_tflops else ""
        return f"{f / s / 1e12:.1f} TFLOP/s{pct}"

    both = [key for key in stacked if key in alone]
    same = all(stacked[key][0] == alone[key][0] for key in both)
    diffs = [stacked[key][3] - alone[key][3] for key in both]
    return "\n".join([
        f"{len(rows)} rung(s): stack {tot_wall:.1f} s ({rate(tot_flops, tot_wall)}), alone {tot_alone:.1f} s "
        f"({rate(tot_flops, tot_alone)}): {tot_alone / tot_wall:.2f}x", *rows,
        f"final training loss, {len(both)} points in both: bytes read {'equal' if same else 'DIFFER'}; "
        f"stack - alone: largest |difference| {max(map(abs, diffs)):.3f} BPB, mean {sum(diffs) / len(diffs):+.4f} BPB"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("stack_log", type=Path)
    ap.add_argument("alone_logs", type=Path, nargs="+")
    ap.add_argument("--gemm", type=float, default=None, help="the bf16 GEMM rate the runs measured (TFLOP/s)")
    a = ap.parse_args()
    print(compare(a.stack_log.read_text(), [p.read_text() for p in a.alone_logs], a.gemm))


if __name__ == "__main__":
    main()
