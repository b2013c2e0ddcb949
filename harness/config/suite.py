"""The suite schema: frozen dataclasses that a YAML suite is validated into (see harness.config).

Every field here is a documented YAML key; unknown keys are rejected by the loader. Defaults are
visible in one place. ``tokbench validate SUITE`` prints the resolved suite.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from encoders.backbone import BackboneConfig
from harness.config.permutation import Permutation
from harness.config.scaling import ScalingConfig

SCHEMA_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class SourceSpec:
    """One data source entry (``data.train`` or an item of ``data.eval``). Keys other than these
    four are the source's own parameters (``params``), validated into its config dataclass
    (``config``).

    source: a registered source name (``files``, ``stdlib``, a Debian corpus, an entry point) or
    ``"package.module:Class"``; ``files`` when omitted.
    name: label of the eval set in results (every eval entry needs one, unique).
    language: ISO 639 code applied to documents that have none.
    part: train | valid | test | all — which split part to use; default: the test part when this
    source is the training source, else all.
    """

    source: str = "files"
    name: str | None = None
    language: str | None = None
    part: Literal["train", "valid", "test", "all"] | None = None
    params: dict[str, Any] = field(default_factory=dict)
    # resolved source config object (filled by the loader)
    config: Any = None


@dataclass(frozen=True, kw_only=True)
class DataConfig:
    """Training and evaluation data.

    train: the one training source (its train part is used).
    eval: the evaluation sets, a list of source entries with unique names.
    valid_fraction: fraction of each source's documents in the valid part (by a stable hash of
    each document id).
    test_fraction: fraction of documents in the test part; the rest is the train part.
    """

    train: SourceSpec
    eval: tuple[SourceSpec, ...]
    valid_fraction: float = 0.05
    test_fraction: float = 0.1


@dataclass(frozen=True, kw_only=True)
class BudgetConfig:
    """Training budget, identical for every encoder.

    train_bytes: UTF-8 bytes of training text each model sees (under match=bytes).
    context_bytes: window length in bytes, for training and scoring, for every encoder.
    batch_bytes: bytes per optimizer step (batch = batch_bytes // context_bytes windows).
    lr: peak AdamW learning rate.
    min_lr_ratio: the schedule decays to min_lr_ratio * lr.
    warmup_bytes: training bytes of linear warm-up from 0 to lr.
    schedule: cosine | constant | linear — decay after warm-up.
    weight_decay, beta1, beta2: AdamW settings.
    grad_clip: maximum global gradient norm (0 = no clipping).
    match: bytes — every encoder sees train_bytes; flops — every encoder trains until the FLOPs
    the ``flops_reference`` encoder spends on train_bytes (fit stages included).
    flops_reference: label of the encoder whose FLOPs set the budget under match=flops (null =
    the first encoder).
    dtype: float32 | bfloat16 — compute dtype of training, and of scoring unless eval.dtype says
    otherwise (bfloat16 on GPU only).
    compile: auto | true | false — ``torch.compile`` the backbone's blocks (auto: on CUDA only).
    Speed only: the model cache key leaves it out.
    micro_batch_bytes: split each step into micro-batches of this many bytes and accumulate
    gradients (0 = the whole step at once), so a large batch fits a smaller GPU; the step's
    gradient is the same sum, to float rounding. Speed/memory only: left out of the cache key.
    cuda_graphs: replay each training step of a byte-level or BPE model as a CUDA graph (on CUDA, one
    micro-batch a step, no data_parallel; ``harness.train.graph_step``): the host's per-step launches
    of small models go. Speed only: left out of the cache key.
    data_parallel: under torchrun / --nproc, train each model on all ranks together (DDP; each
    rank takes a slice of every step's windows) instead of whole models per rank.
    deterministic: deterministic kernels (torch's deterministic algorithms, cuBLAS's fixed
    workspace, cuDNN without benchmark mode, no config chosen by timing in Inductor or FuzzyTok),
    so a seed's numbers repeat on the same GPU and software; on a GPU two trainings of one seed
    otherwise differ (BENCHMARKS.md). Slower; CPU runs are deterministic either way.
    Part of the model cache key when true. See harness/infra/determinism.py.
    idle_steps: [first, last] — measure the GPU's idle share of each model's training steps first
    to last (0-based, last excluded) with the torch profiler, into run.json's ``gpu_idle`` (CUDA
    only; null = off; harness/infra/meters.py). Measurement only: left out of the cache key.
    """

    train_bytes: int = 1_000_000
    context_bytes: int = 256
    batch_bytes: int = 8192
    lr: float = 3e-3
    min_lr_ratio: float = 0.1
    warmup_bytes: int = 50_000
    schedule: Literal["cosine", "constant", "linear"] = "cosine"
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float = 1.0
    match: Literal["bytes", "flops"] = "bytes"
    flops_reference: str | None = None
    dtype: Literal["float32", "bfloat16"] = "float32"
    compile: Literal["auto"] | bool = "auto"
    micro_batch_bytes: int = 0
    cuda_graphs: bool = False
    data_parallel: bool = False
    deterministic: bool = False
    idle_steps: tuple[int, int] | None = None

    @property
    def windows_per_step(self) -> int:
        """Windows of ``context_bytes`` in one optimizer step (at least 1)."""
        return max(1, self.batch_bytes // self.context_bytes)

    @property
    def windows_per_micro_batch(self) -> int:
        """Windows per forward and backward: ``micro_batch_bytes``' worth, or the whole step's."""
        return max(1, self.micro_batch_bytes // self.context_bytes) if self.micro_batch_bytes else self.windows_per_step


@dataclass(frozen=True, kw_only=True)
class EncoderSpec:
    """One encoder entry after sweep expansion. label is unique (``bpe-4096``)."""

    name: str
    label: str
    config: Any  # the encoder's frozen config dataclass
    backbone: BackboneConfig | None
    params: dict[str, Any] = field(default_factory=dict)  # as written, for run.json
    # the stream it is trained and scored on (``permutations:``; docs/fragility.md)
    permutation: Permutation = Permutation()


@dataclass(frozen=True, kw_only=True)
class PerturbationSpec:
    """One perturbation at one severity after expansion. id: user id or the name; params: the
    resolved dataclass fields (without lang) — they are part of the rng seed.

    perturbation: the instance, built once by the loader with its final severity (lang unset;
    ``Perturbation.for_language`` gives the per-language variants the run needs)."""

    name: str
    id: str
    severity: float
    params: dict[str, Any]
    cls: Any = None
    perturbation: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, kw_only=True)
class EvalConfig:
    """How every cell is scored.

    modes: full (score the perturbed text) and/or clean_target (perturb a prefix, score the clean
    continuation).
    max_docs: documents per eval set (null = all).
    stride_bytes: rolling-window stride for long documents (null = context_bytes // 2).
    context_fraction: clean_target cuts each document at the first whitespace at or after this
    fraction of its characters.
    target_bytes: clean_target scores this many bytes of the clean continuation.
    min_doc_bytes: eval documents shorter than this (in bytes) are skipped.
    sample_docs: documents per cell whose per-byte NLL is stored in samples.jsonl.
    batch_windows: windows per scoring batch of a byte-level model; an autoregressive BPE model
    takes 4x as many (a window holds a third to a quarter as many tokens as bytes), so its
    forwards are about as large. Numbers do not depend on it beyond float rounding.
    keep_texts: store every document's original and perturbed text in samples.jsonl (once per
    cell and document, on the first encoder's row: the texts are the same for every encoder).
    Off by default, as lm-eval's --log_samples: the texts are much of the file (sizes:
    docs/results.md) and no report reads them; the per-document numbers are written either way.
    mc_samples: Monte Carlo samples per window for encoders whose score is an estimate (masked
    diffusion's NELBO, docs/mdm.md); >= 2, so each window's estimate has a standard error.
    dtype: auto | float32 | bfloat16 — scoring precision. auto follows budget.dtype; float32
    scores in full precision models trained in bfloat16 (bf16 scoring stayed within 2e-4 BPB of
    fp32 in most cells, and moved some by up to 4.4e-4, BENCHMARKS.md), at the cost of slower
    forwards. On the CPU scoring is float32 whatever this says.
    """

    modes: tuple[Literal["full", "clean_target"], ...] = ("full", "clean_target")
    max_docs: int | None = 50
    stride_bytes: int | None = None
    context_fraction: float = 0.5
    target_bytes: int = 64
    min_doc_bytes: int = 16
    sample_docs: int = 3
    batch_windows: int = 32
    keep_texts: bool = False
    mc_samples: int = 8
    dtype: Literal["auto", "float32", "bfloat16"] = "auto"


@dataclass(frozen=True, kw_only=True)
class AnalysisSpec:
    """A per-word analysis over per-byte NLL (e.g. ``morphology``) with its parameters."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)
    config: Any = None


@dataclass(frozen=True, kw_only=True)
class BaselineConfig:
    """Model-free baselines, scored on every eval set, perturbation, mode, permutation and seed
    (results rows with kind = baseline; docs/fragility.md).

    compressors: any of deflate, bz2, lzma — bits of C(d ‖ context ‖ scored) − C(d ‖ context)
    on raw streams.
    dictionary_bytes: the first this many bytes of the training stream (permuted like the
    scored windows) prime every compressor (0 = none).
    """

    compressors: tuple[Literal["deflate", "bz2", "lzma"], ...] = ()
    dictionary_bytes: int = 0


@dataclass(frozen=True, kw_only=True)
class OverlapConfig:
    """Work a run does beside the models' training and scoring (docs/gpu.md). Speed only: no
    number depends on it, and no cache key holds it. auto: on where it pays (CUDA, and the CPUs
    named below); true / false force it on or off.

    compile_ahead: torch.compile's graphs compiled in spawned processes ahead of the run (auto:
    when the run compiles on CUDA with >= 4 usable CPUs).
    compile_ahead_workers: those processes, 1-4 (null: 2 on >= 8 usable CPUs, else 1).
    compile_ahead_windows: windows a training step of theirs (0: the run's own batch; null: by
    the GPU's memory, harness/overlap/compileahead.py).
    compile_ahead_wait: the run waits for each model's graphs (slower; the caches are then hit
    in a fixed order, as tests need).
    plan_ahead: perturbations fitted and planned in a forked process while the models train
    (auto: on CUDA with the plan cache and >= 4 usable CPUs).
    cells_behind: a model's cells made, and a trained model's files written, in the background
    while the next model scores or trains (auto: on CUDA).
    report_process: the report rendered in a process of its own (auto: on CUDA).
    """

    compile_ahead: Literal["auto"] | bool = "auto"
    compile_ahead_workers: int | None = None
    compile_ahead_windows: int | None = None
    compile_ahead_wait: bool = False
    plan_ahead: Literal["auto"] | bool = "auto"
    cells_behind: Literal["auto"] | bool = "auto"
    report_process: Literal["auto"] | bool = "auto"


@dataclass(frozen=True, kw_only=True)
class Suite:
    """A whole suite. ``raw`` is the resolved mapping (after include and --set), for run.json;
    ``path`` the suite file.

    name: the suite's name; the default run directory is ``runs/<name>/``.
    seeds: training seeds; every encoder is trained and scored once per seed.
    data: training and eval data.
    budget: training budget, identical for every encoder.
    backbone: the shared transformer.
    encoders: the encoders to train and compare.
    perturbations: the perturbations to score under (the clean baseline is added automatically).
    eval: scoring settings.
    analyses: per-word analyses over per-byte NLL.
    permutations: static permutations of every window (global, inter_block, intra_block); each
    encoder is also trained and scored on each (labels ``bytes~inter_block-16``); needs full mode
    with stride = context (docs/fragility.md).
    baselines: compressor baselines (deflate, bz2, lzma) on the same windows.
    scaling: an IsoFLOP sweep over FLOP budgets and model sizes (docs/scaling.md); null = one
    model per encoder at ``budget``.
    overlap: work done beside training and scoring (compile ahead, plan ahead, cells behind,
    the report's process); speed only.
    description: free text, kept in run.json with the rest of the suite.
    schema_version: suite format version; a suite may state it, and it must match this tokbench.
    plugin_paths: folders, relative to the suite file, where ``module:Class`` plugins are looked
    up besides installed packages (default: the suite's own folder; never the working directory).
    """

    name: str
    seeds: tuple[int, ...]
    data: DataConfig
    budget: BudgetConfig
    backbone: BackboneConfig
    encoders: tuple[EncoderSpec, ...]
    perturbations: tuple[PerturbationSpec, ...] = ()
    eval: EvalConfig = EvalConfig()
    analyses: tuple[AnalysisSpec, ...] = ()
    permutations: tuple[Permutation, ...] = ()
    baselines: BaselineConfig = BaselineConfig()
    scaling: ScalingConfig | None = None
    overlap: OverlapConfig = OverlapConfig()
    description: str = ""
    schema_version: int = SCHEMA_VERSION
    plugin_paths: tuple[str, ...] = (".",)
    raw: dict[str, Any] = field(default_factory=dict, compare=False)
    path: str = ""

    @property
    def score_dtype(self) -> Literal["float32", "bfloat16"]:
        """The precision cells are scored in: ``eval.dtype``, or ``budget.dtype`` under auto (bf16
        autocast applies on CUDA only)."""
        return self.budget.dtype if self.eval.dtype == "auto" else self.eval.dtype

    def n_cells(self, per_seed: bool = False) -> int:
        """Cells a run scores: encoders × eval sets × (clean + perturbation cells) × modes, times
        the seeds unless ``per_seed``. The one formula the CLI, the dry run and the runner use.
        A scaling grid scores every (selected budget, size, encoder) model: an upper bound, since
        refused points are only known at run time."""
        models = len(self.encoders)
        if self.scaling is not None:
            models *= len(self.scaling.selected()) * len(self.scaling.ladder)
        per = models * len(self.data.eval) * (1 + len(self.perturbations)) * len(self.eval.modes)
        return per if per_seed else per * len(self.seeds)

    def n_baseline_cells(self) -> int:
        """Compressor cells a run scores: compressors × (original + permutations) × eval sets ×
        (clean + perturbation cells) × modes × seeds (docs/fragility.md)."""
        streams = len(self.baselines.compressors) * (1 + len(self.permutations))
        return (streams * len(self.data.eval) * (1 + len(self.perturbations)) * len(self.eval.modes)
                * len(self.seeds))

    def training_order(self) -> list[EncoderSpec]:
        """The encoders in the order a run trains them: under ``match: flops`` the reference
        first (its total FLOPs are the others' budget), else as listed."""
        order = list(self.encoders)
        if self.budget.match == "flops":
            ref = self.budget.flops_reference or order[0].label
            order.sort(key=lambda s: s.label != ref)
        return order
