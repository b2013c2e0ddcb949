"""A tuned key's choice kept on disk (``kernels.TUNE_CACHE``): a second process launches the
config the first one timed best, without timing again; a damaged or missing record means tuning
as before. The autotuner is a stand-in (Triton's interpreter keeps one config and never times),
the store is Triton's cache manager in a private directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import triton

from encoders.fuzzytok import kernels

CONFIGS = [triton.Config({"BLOCK_T": t}, num_warps=4) for t in (32, 64, 128)]


class FakeTuner:
    """What ``ThinLauncher`` uses of ``triton.runtime.Autotuner``: ``keys``, ``arg_names``,
    ``cache``, ``prune_configs`` and ``tuner[grid](*args, **consts)``, which "times" the configs
    (picking ``best``) only when its key is not in ``cache``."""

    def __init__(self, best: int) -> None:
        self.keys, self.arg_names, self.cache, self.nargs = ["CI"], ["x", "CI"], {}, None
        self.best, self.timed = best, 0
        self.best_config: Any = None

    def prune_configs(self, kwargs: dict) -> list:
        return list(CONFIGS)

    def __getitem__(self, grid: Any):  # noqa: ANN204
        def run(*args: Any, **consts: Any) -> None:
            key = (consts["CI"],)
            if key not in self.cache:
                self.timed += 1
                self.cache[key] = CONFIGS[self.best]
            self.best_config = self.cache[key]
        return run


class FakeJit:
    cache_key = "source-hash"
    __name__ = "_conv_kernel"


def launcher(tuner: FakeTuner) -> kernels.ThinLauncher:
    lau = object.__new__(kernels.ThinLauncher)
    lau.tuner, lau.jit, lau.heuristics, lau.arg_names = tuner, FakeJit(), {}, ["x"]
    lau.entries, lau.tuned_calls, lau.direct_calls, lau.tune_seconds = {}, 0, 0, 0.0
    return lau


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from triton.runtime.cache import FileCacheManager

    monkeypatch.setattr(kernels, "INTERPRET", False)  # the store is skipped under the interpreter
    monkeypatch.setattr(kernels, "PARALLEL_COMPILE", 0)
    monkeypatch.setattr(kernels, "TUNE_CACHE", True)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))

    def choice_file(self: kernels.ThinLauncher, tkey: tuple, configs: list) -> tuple[object, str]:
        # the real one hashes Triton's version and the GPU target too (no GPU here)
        return FileCacheManager(f"k{abs(hash((tkey, tuple(map(str, configs)))))}"), "choice.json"

    monkeypatch.setattr(kernels.ThinLauncher, "_choice_file", choice_file)
    return tmp_path


def tune(tuner: FakeTuner, ci: int = 64) -> None:
    launcher(tuner)._tune_key(None, lambda meta: (1,), lambda meta: (object(),), {"CI": ci})


def test_second_process_takes_the_first_ones_choice(store: Path) -> None:
    first = FakeTuner(best=2)
    tune(first)
    assert first.timed == 1 and first.best_config is CONFIGS[2]
    second = FakeTuner(best=0)  # would time another config best
    tune(second)
    assert second.timed == 0 and second.best_config is CONFIGS[2]
    other_key = FakeTuner(best=1)
    tune(other_key, ci=128)  # a key nobody tuned: timed
    assert other_key.timed == 1 and other_key.best_config is CONFIGS[1]


def test_damaged_record_tunes_again(store: Path) -> None:
    tune(FakeTuner(best=2))
    for f in store.rglob("choice.json"):
        f.write_text("{not json")
    again = FakeTuner(best=1)
    tune(again)
    assert again.timed == 1 and again.best_config is CONFIGS[1]
    later = FakeTuner(best=0)
    tune(later)  # the damaged record was replaced by the new choice
    assert later.timed == 0 and later.best_config is CONFIGS[1]


def test_switched_off_times_every_process(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernels, "TUNE_CACHE", False)
    tune(FakeTuner(best=2))
    again = FakeTuner(best=1)
    tune(again)
    assert again.timed == 1 and again.best_config is CONFIGS[1]
