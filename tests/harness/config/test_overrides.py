"""harness.config.overrides: --set overrides and their error messages."""

from __future__ import annotations

from pathlib import Path

import pytest
from config_fixtures import BASE, FakeSource, err, write

from harness.config import (
    load_raw,
    load_suite,
)

# ---------------------------------------------------------------------------------------------
# --set


def test_set_overrides(tmp_path: Path) -> None:
    write(tmp_path, BASE)
    s = load_suite(
        "suite.yaml",
        [
            "budget.lr=1e-3",
            "encoders[1].vocab_size=64",
            "encoders.1.kind=b",
            "eval.max_docs=5",  # a mapping that was absent is created
            "perturbations[0].severity=[0.2]",
            "description=quick run",
            "budget.flops_reference=bytes",
        ],
    )
    assert s.budget.lr == 1e-3 and s.eval.max_docs == 5 and s.description == "quick run"
    assert [e.label for e in s.encoders] == ["bytes", "fake"]  # a scalar is not a sweep
    assert s.encoders[1].config.kind == "b"
    assert [p.severity for p in s.perturbations] == [0.2]
    assert s.raw["eval"] == {"max_docs": 5}
    s = load_suite(
        "suite.yaml", ["eval.stride_bytes=", "encoders[0]={name: bytes, backbone: null}"]
    )
    assert s.eval.stride_bytes is None and s.encoders[0].backbone is None


@pytest.mark.parametrize(
    ("arg", "expected"),
    [
        ("budget.lr=fast", "--set budget.lr=fast: budget.lr: expected a number, got 'fast'"),
        ("budget.lrr=1", "--set budget.lrr=1: budget: unknown key 'lrr' (did you mean 'lr'?)"),
        (
            "encoders[1].dilations=[1, x]",
            "--set encoders[1].dilations=[1, x]: encoders[1].dilations[1]: expected an int, got 'x'",
        ),
        (
            "encoders.5.kind=a",
            "--set encoders.5.kind=a: encoders has 2 item(s); index 5 is out of range",
        ),
        (
            "encoders.x.kind=a",
            "--set encoders.x.kind=a: encoders is a list; index it with a number, not 'x'",
        ),
        ("budget[0]=1", "--set budget[0]=1: budget is a mapping, not a list"),
        ("name.x=1", "--set name.x=1: name is 'demo', not a mapping or a list"),
        ("budget.lr", "--set budget.lr: expected KEY.PATH=VALUE (e.g. budget.lr=1e-3)"),
        ("=3", "--set =3: expected KEY.PATH=VALUE (e.g. budget.lr=1e-3)"),
        ("a..b=3", "--set a..b=3: expected KEY.PATH=VALUE (e.g. budget.lr=1e-3)"),
        (
            "budget={lr: 1, lr: 2}",
            "--set budget={lr: 1, lr: 2}: cannot read the value as YAML: duplicate key 'lr'",
        ),
        ("include=x.yaml", "--set include=x.yaml: include cannot be set from the command line"),
        (
            "seeds=[1",
            "--set seeds=[1: cannot read the value as YAML: while parsing a flow sequence, expected ',' or ']', but got '<stream end>'",
        ),
        (
            "budget.flops_reference=fake-10",
            "--set budget.flops_reference=fake-10: budget.flops_reference: no encoder labelled 'fake-10' (did you mean 'fake-1024'?); labels: bytes, fake-512, fake-1024",
        ),
    ],
)
def test_set_errors(tmp_path: Path, arg: str, expected: str) -> None:
    assert err(tmp_path, BASE, arg) == expected


def test_load_raw_locations(tmp_path: Path) -> None:
    write(tmp_path, BASE)
    raw, locs = load_raw("suite.yaml", ["budget.lr=1"])
    assert raw["budget"]["lr"] == 1
    assert locs[("budget", "lr")] == "--set budget.lr=1"
    assert locs[("budget", "train_bytes")] == "suite.yaml:11"

def test_set_into_shorthand_entries(tmp_path: Path) -> None:
    write(tmp_path, BASE.replace("  train: {source: fake_src, text: abc}", "  train: fake_src"))
    s = load_suite("suite.yaml", ["encoders[0].id=b0", "data.train.text=xyz"])
    assert s.encoders[0].label == "b0" and s.encoders[0].name == "bytes"
    assert s.data.train.config == FakeSource(text="xyz")
