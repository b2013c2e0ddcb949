"""``tokbench sanity``: every probe (harness.sanity.probes, and harness.sanity.mdm for encoders that
support ``objective: mdm``) for each registered encoder, one line each."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from harness.infra.device import pick_device
from harness.sanity.mdm import probe_mdm_entropy, probe_mdm_leak_trained, supports_mdm
from harness.sanity.probes import (
    ProbeResult,
    probe_causality_trained,
    probe_markov,
    probe_random_bytes,
    trainable_encoders,
)


def run_sanity(encoders: Sequence[str] | None = None, device: str = "auto", quick: bool = False) -> bool:
    """Run the probes for the given (default: all registered) encoders; print a table; True if
    every probe passed."""
    dev = pick_device(device)
    names = list(encoders) if encoders else trainable_encoders()
    results: list[ProbeResult] = []
    for name in names:
        if name not in trainable_encoders():  # no tiny model to train: a run probes its checkpoint
            print(f"SKIP  {name:<10} trained elsewhere: `tokbench run` probes the causality of its checkpoint "
                  "before scoring it", flush=True)
            continue
        probes = [probe_causality_trained] if quick else [probe_causality_trained, probe_random_bytes, probe_markov]
        if supports_mdm(name):  # the same encoder again under objective: mdm (harness/sanity/mdm.py)
            probes += [probe_mdm_leak_trained] if quick else [probe_mdm_leak_trained, probe_mdm_entropy]
        for probe in probes:
            try:
                r = probe(name, dev)
            except Exception as e:  # a crashing encoder is a failed probe, reported, not hidden
                label = name + ("[mdm]" if "mdm" in probe.__name__ else "")
                r = ProbeResult(label, probe.__name__.replace("probe_", ""), False, f"{type(e).__name__}: {e}")
            results.append(r)
            print(f"{'PASS' if r.ok else 'FAIL'}  {r.encoder:<10} {r.probe:<13} {r.detail}", flush=True)
    bad = [r for r in results if not r.ok]
    print(f"\n{len(results) - len(bad)} passed, {len(bad)} failed", file=sys.stderr if bad else sys.stdout)
    return not bad
