"""Suite sections of the context-fragility study (docs/fragility.md): ``permutations:`` and
``baselines:``. Called from ``harness.config.build.build_suite``."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from harness.config.checks import check_ranges
from harness.config.convert import check_keys, convert_value
from harness.config.permutation import KINDS, Permutation, check_scoring, variant_label
from harness.config.suite import BaselineConfig, EncoderSpec, EvalConfig
from harness.config.where import Where, show_value
from harness.infra import plugins


def permutations(value: Any, where: Where, context_bytes: int) -> tuple[Permutation, ...]:
    """``permutations:`` items — a kind (``global``) or ``{kind, block_bytes}``, where a list of
    block sizes sweeps — to distinct non-identity permutations, in order (``none`` is implied).
    A block is at most a window (``context_bytes``): a larger ``block_bytes`` permutes nothing
    more, and ``intra_block`` would draw a fixed order of that many positions (1e9: 24 GB)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise where.error(f"expected a list of permutations, got {show_value(value)}")
    out: list[Permutation] = []
    for i, item in enumerate(value):
        w = where.at(i)
        entry = {"kind": item} if isinstance(item, str) else item
        if not isinstance(entry, Mapping):
            raise w.error(f"expected a kind or a mapping with 'kind', got {show_value(item)}")
        check_keys(entry, {"kind", "block_bytes"}, w)
        if "kind" not in entry:
            raise w.error(f"missing required key 'kind' ({', '.join(KINDS)})")
        kind = convert_value(Literal[KINDS], entry["kind"], w.at("kind"))  # type: ignore[valid-type]
        raw_bb = entry.get("block_bytes")
        if isinstance(raw_bb, list) and not raw_bb:
            raise w.at("block_bytes").error("an empty list sweeps over nothing; give at least one size")
        given = ([(v, w.at("block_bytes", j)) for j, v in enumerate(raw_bb)]
                 if isinstance(raw_bb, list) else [(raw_bb, w.at("block_bytes"))])
        for v, ww in given:
            try:
                perm = Permutation(kind=kind, block_bytes=convert_value(int | None, v, ww))
            except ValueError as e:
                raise ww.error(str(e)) from None
            if perm.block_bytes is not None and perm.block_bytes > context_bytes:
                raise ww.error(f"block_bytes ({perm.block_bytes:,}) must be <= budget.context_bytes "
                               f"({context_bytes:,}): a block is at most one window")
            if perm in out:
                raise ww.error(f"permutation {perm.label} is listed twice")
            if not perm.is_identity:  # the original stream is always there
                out.append(perm)
    return tuple(out)


def check_permuted_scoring(ev: EvalConfig, context_bytes: int, where: Where) -> None:
    """Full mode with stride = context only (one-line error at ``eval``)."""
    try:
        check_scoring(ev.modes, ev.stride_bytes, context_bytes)
    except ValueError as e:
        raise where.error(str(e)) from None


def permuted_encoders(encoders: tuple[EncoderSpec, ...], perms: tuple[Permutation, ...],
                      where: Where, search_paths: Sequence[Path]) -> tuple[EncoderSpec, ...]:
    """Each encoder on the original stream, then once per permutation (``bytes~global``)."""
    out: list[EncoderSpec] = []
    for spec in encoders:
        out.append(spec)
        try:
            cls = plugins.resolve("encoder", spec.name, search_paths)
        except plugins.PluginError as e:
            raise where.error(str(e)) from None
        if not cls.permutable(spec.config):
            raise where.error(
                f"encoder {spec.label!r} cannot be permuted: it predicts {cls.unit}s and its "
                "unit_lengths/collate_units do not serve this configuration (docs/fragility.md)")
        out += [dataclasses.replace(spec, label=variant_label(spec.label, p), permutation=p)
                for p in perms]
    labels = [s.label for s in out]
    dup = next((x for x in labels if labels.count(x) > 1), None)
    if dup is not None:
        raise where.error(f"duplicate encoder label {dup!r} after adding permutations; rename an 'id'")
    return tuple(out)


def baselines(value: Any, where: Where) -> BaselineConfig:
    """``baselines:`` — compressors (each at most once) and a dictionary size >= 0."""
    cfg = convert_value(BaselineConfig, value, where)
    check_ranges(cfg, where)
    if len(set(cfg.compressors)) != len(cfg.compressors):
        raise where.at("compressors").error(f"compressors repeat: {list(cfg.compressors)}")
    return cfg
