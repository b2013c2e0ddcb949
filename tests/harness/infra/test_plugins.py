"""harness.infra.plugins: built-in, registered, entry-point and "module:Class" resolution, close-match errors."""

from __future__ import annotations

import importlib.metadata
import sys
import textwrap
from pathlib import Path

import pytest

from harness.infra import plugins
from harness.infra.plugins import PluginError, available, resolve
from perturbations import registry as pert_registry
from perturbations.base import Perturbation
from sources.base import Source
from sources.registry import REGISTRY as SOURCES


def test_builtin_encoder_resolves_lazily() -> None:
    from encoders.byte_baseline import ByteEncoder

    assert resolve("encoder", "bytes") is ByteEncoder
    assert available("encoder")["bytes"] == "encoders.byte_baseline:ByteEncoder"


def test_builtin_perturbation_and_source() -> None:
    from perturbations.builtin import Identity

    assert resolve("perturbation", "identity") is Identity
    assert available("perturbation")["identity"] == "perturbations.builtin:Identity"
    assert issubclass(resolve("source", "files"), Source)


def test_unknown_name_suggests_closest() -> None:
    with pytest.raises(PluginError) as e:
        resolve("perturbation", "identiy")
    msg = str(e.value)
    assert msg.startswith("unknown perturbation 'identiy' (did you mean 'identity'?); known: ")
    assert "identity" in msg.split("known: ")[1]
    assert "\n" not in msg


def test_unknown_name_without_close_match() -> None:
    with pytest.raises(PluginError, match=r"^unknown encoder 'zzzzzz'; known: .*bytes"):
        resolve("encoder", "zzzzzz")


def test_unknown_kind() -> None:
    with pytest.raises(PluginError, match="unknown plugin kind 'tokenizer'"):
        resolve("tokenizer", "x")  # type: ignore[arg-type]


def _write_plugin(tmp_path: Path, module: str, body: str) -> None:
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(body))


def test_module_class_from_search_path(tmp_path: Path) -> None:
    _write_plugin(
        tmp_path,
        "tb_plugin_shout",
        """
        from dataclasses import dataclass
        from perturbations.base import Perturbation

        @dataclass(kw_only=True)
        class Shout(Perturbation):
            times: int = 1

            def perturb(self, text, rng):
                return text.upper() * self.times
        """,
    )
    try:
        cls = resolve("perturbation", "tb_plugin_shout:Shout", search_paths=[tmp_path])
        assert cls.__name__ == "Shout" and issubclass(cls, Perturbation)
        # the directory was on sys.path for that import only
        assert str(tmp_path.resolve()) not in sys.path
    finally:
        sys.modules.pop("tb_plugin_shout", None)


def test_module_class_errors(tmp_path: Path) -> None:
    _write_plugin(
        tmp_path, "tb_plugin_bad", "class NotAPerturbation:\n    pass\nclass Shoutt:\n    pass\n"
    )
    try:
        with pytest.raises(
            PluginError,
            match=r"^perturbation 'tb_plugin_nope:X': cannot import module 'tb_plugin_nope'",
        ):
            resolve("perturbation", "tb_plugin_nope:X", search_paths=[tmp_path])
        with pytest.raises(PluginError) as e:
            resolve("perturbation", "tb_plugin_bad:Shout", search_paths=[tmp_path])
        assert str(e.value) == (
            "perturbation 'tb_plugin_bad:Shout': module 'tb_plugin_bad' has no attribute 'Shout' "
            "(did you mean 'Shoutt'?)"
        )
        with pytest.raises(
            PluginError, match="is not a subclass of perturbations.base.Perturbation"
        ):
            resolve("perturbation", "tb_plugin_bad:NotAPerturbation", search_paths=[tmp_path])
        with pytest.raises(PluginError, match="expected 'package.module:ClassName'"):
            resolve("perturbation", "tb_plugin_bad:", search_paths=[tmp_path])
    finally:
        sys.modules.pop("tb_plugin_bad", None)


def test_plugin_import_error_is_one_line(tmp_path: Path) -> None:
    _write_plugin(tmp_path, "tb_plugin_broken", "import tb_missing_dependency_xyz\n")
    with pytest.raises(PluginError) as e:
        resolve("source", "tb_plugin_broken:Src", search_paths=[tmp_path])
    assert "importing 'tb_plugin_broken' failed" in str(e.value)
    assert "tb_missing_dependency_xyz" in str(e.value)


def test_registered_at_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import dataclass

    @dataclass(frozen=True, kw_only=True)
    class MySource(Source):
        size: int = 1

    monkeypatch.setitem(SOURCES, "my_source", MySource)
    assert resolve("source", "my_source") is MySource
    assert available("source")["my_source"].endswith(
        ":test_registered_at_runtime.<locals>.MySource"
    )


def test_missing_builtin_module_is_skipped_only_if_it_is_that_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a built-in module that does not exist yet is skipped ...
    monkeypatch.setattr(
        pert_registry.REGISTRY,
        "modules",
        [*pert_registry.REGISTRY.modules, "perturbations.tb_not_written"],
    )
    assert "identity" in available("perturbation")
    # ... but one whose own import fails on a missing dependency is an error
    _write_plugin(tmp_path, "tb_builtin_needs_dep", "import tb_missing_dependency_abc\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(pert_registry.REGISTRY, "modules", ["tb_builtin_needs_dep"])
    with pytest.raises(PluginError) as e:
        available("perturbation")
    assert str(e.value) == (
        "built-in module 'tb_builtin_needs_dep' cannot be imported: "
        "No module named 'tb_missing_dependency_abc'"
    )


class _FakeEntryPoint:
    """Stands in for importlib.metadata.EntryPoint (name, value, load)."""

    def __init__(self, name: str, value: str, target: object, log: list[str]) -> None:
        self.name, self.value, self._target, self._log = name, value, target, log

    def load(self) -> object:
        self._log.append(self.name)
        return self._target


def test_entry_points_are_listed_without_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import dataclass

    @dataclass(kw_only=True)
    class EpPert(Perturbation):
        def perturb(self, text, rng):  # type: ignore[no-untyped-def]
            return text

    loaded: list[str] = []
    eps = [
        _FakeEntryPoint("ep.pert", "thirdparty.mod:EpPert", EpPert, loaded),
        _FakeEntryPoint("ep.other", "other.mod:Other", object(), loaded),
    ]

    def fake_entry_points(*, group: str):  # type: ignore[no-untyped-def]
        return eps if group == "tokbench.perturbations" else []

    monkeypatch.setattr(importlib.metadata, "entry_points", fake_entry_points)
    listing = available("perturbation")
    assert listing["ep.pert"] == "thirdparty.mod:EpPert"
    assert listing["ep.other"] == "other.mod:Other"
    assert loaded == []
    assert resolve("perturbation", "ep.pert") is EpPert
    assert loaded == ["ep.pert"]  # only the entry point that was asked for
    with pytest.raises(
        PluginError, match=r"unknown perturbation 'ep.pertt' \(did you mean 'ep.pert'\?\)"
    ):
        resolve("perturbation", "ep.pertt")


def test_known_names_sorted() -> None:
    names = plugins.known_names("encoder")
    assert names == sorted(names) and "bytes" in names


def test_builtin_encoder_whose_module_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    from encoders import registry as enc_registry

    monkeypatch.setitem(enc_registry.REGISTRY.lazy, "ghost", "encoders.tb_ghost:GhostEncoder")
    assert "ghost" not in available("encoder")  # not listed until its module exists
    with pytest.raises(PluginError) as e:
        resolve("encoder", "ghost")
    assert str(e.value) == (
        "built-in encoder 'ghost': cannot import module 'encoders.tb_ghost' (it is not installed)"
    )


def test_encoder_class_needs_dataclass_config(tmp_path: Path) -> None:
    _write_plugin(
        tmp_path,
        "tb_plugin_noconfig",
        """
        from encoders.base import Encoder

        class NoConfig(Encoder):
            pass
        """,
    )
    try:
        with pytest.raises(PluginError) as e:
            resolve("encoder", "tb_plugin_noconfig:NoConfig", search_paths=[tmp_path])
    finally:
        sys.modules.pop("tb_plugin_noconfig", None)
    assert str(e.value) == (
        "encoder 'tb_plugin_noconfig:NoConfig': encoder class NoConfig has no dataclass 'Config' attribute"
    )


def test_broken_builtin_module_blocks_only_names_it_could_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_plugin(tmp_path, "tb_builtin_broken", "raise RuntimeError('half written')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(
        pert_registry.REGISTRY, "modules", ["tb_builtin_broken", *pert_registry.REGISTRY.modules]
    )
    # a name registered by a sound module still resolves ...
    assert resolve("perturbation", "identity").__name__ == "Identity"
    # ... an unknown one reports the broken module, since the name may have lived there
    with pytest.raises(PluginError) as e:
        resolve("perturbation", "typo.nope")
    assert str(e.value) == (
        "perturbation 'typo.nope' not found; built-in module 'tb_builtin_broken' cannot be "
        "imported: RuntimeError: half written"
    )
    # listing is strict
    with pytest.raises(PluginError, match="tb_builtin_broken"):
        available("perturbation")
