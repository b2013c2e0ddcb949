"""Hostile YAML is refused on one line, fast and in bounded memory: an alias bomb, deep nesting,
a huge document (harness/config/yaml_limits.py, hooked into the suite loader)."""

from __future__ import annotations

import resource
import time
from pathlib import Path

import pytest

from harness.config import ConfigError, parse_yaml
from harness.config.yaml_limits import MAX_DEPTH, MAX_TEXT_CHARS, check_yaml_text


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """9 levels x 9 aliases: 9**9 = 387 million leaves once expanded, 1 kB of text."""
    lines = [f"a0: &a0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


def test_alias_bomb_is_refused_fast_on_one_line() -> None:
    t0 = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ConfigError) as e:
        parse_yaml(alias_bomb(), "bomb.yaml")
    assert time.perf_counter() - t0 < 5  # a correctness bound, not a benchmark: unbounded takes minutes
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # KiB: no expansion
    msg = str(e.value)
    assert msg.startswith("bomb.yaml:") and "expands to more than" in msg and "\n" not in msg


def test_normal_aliases_still_work() -> None:
    data, _ = parse_yaml("base: &b {layers: 2, dim: 32}\nother: *b\n", "ok.yaml")
    assert data["other"] == {"layers": 2, "dim": 32}


@pytest.mark.parametrize("text", ["[" * 1000 + "]" * 1000, "a:\n" + "".join(" " * i + "- \n" for i in range(1, 200))])
def test_deep_nesting_is_one_line_not_a_recursion_error(text: str) -> None:
    with pytest.raises(ConfigError, match=f"nested deeper than {MAX_DEPTH} levels"):
        parse_yaml(text, "deep.yaml")


def test_huge_document_is_refused() -> None:
    text = "x: " + "a" * (MAX_TEXT_CHARS + 1)
    with pytest.raises(ValueError, match="the limit is"):
        check_yaml_text(text, "big.yaml")
    with pytest.raises(ConfigError, match=r"^big.yaml:1: .*the limit is"):
        parse_yaml(text, "big.yaml")


def test_cli_alias_bomb_and_deep_nesting_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    for name, text in (("bomb.yaml", alias_bomb()), ("deep.yaml", "name: x\nseeds: " + "[" * 1000 + "]" * 1000)):
        p = tmp_path / name
        p.write_text(text)
        capsys.readouterr()
        assert main(["validate", str(p)]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and f"{name}:" in lines[0]


@pytest.mark.parametrize("tag", ["!!python/object/apply:os.system ['echo pwned']", "!!python/name:os.system"])
def test_python_tags_are_errors(tag: str) -> None:
    with pytest.raises(ConfigError, match=r"^tags.yaml:1: invalid YAML"):
        parse_yaml(f"name: {tag}\n", "tags.yaml")
