"""Hostile or odd input is one line on stderr naming where it is wrong, exit code 2, never a
traceback: self-referencing YAML aliases (file, ``--set``, ``--param``), nesting built from
aliases, a NUL byte or a non-file in ``include:``, a directory or device given as the suite, an
empty ``--set`` value, and out-of-range report numbers."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import MAX_BOOTSTRAP, main
from harness.config import ConfigError, parse_yaml
from harness.config.yaml_limits import MAX_DEPTH, MAX_TEXT_CHARS, YamlLimitError, check_yaml_text


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    """The single stderr line of a failed command (warnings aside); no traceback anywhere."""
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [ln for ln in err.strip().splitlines() if not ln.startswith("tokbench: warning:")]
    assert len(lines) == 1 and lines[0].startswith("tokbench: error: "), lines
    return lines[0]


def validate(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """``tokbench validate ARGS`` in process; asserts exit code 2 and returns the error line."""
    capsys.readouterr()
    assert main(["validate", *args, "--no-memory-check"]) == 2
    return one_error_line(capsys)


# ---------------------------------------------------------------------------------------------
# 1. an alias inside its own anchor, at the root of a document or below it


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("--- &a\nname: x\nself: *a\n", 3),  # the root mapping contains itself
        ("&a [1, *a]\n", 1),  # the root list
        ("--- &a\nname: x\n<<: *a\n", 3),  # a merge key into itself
        ("name: x\nseeds: &a [*a]\n", 2),  # nested: PyYAML refused it already, without this text
    ],
)
def test_recursive_alias_in_a_file(
    text: str, line: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "rec.yaml").write_text(text)
    msg = validate(capsys, str(tmp_path / "rec.yaml"))
    assert f"rec.yaml:{line}: invalid YAML: recursive alias '*a'" in msg


def test_recursive_alias_is_refused_before_construction() -> None:
    with pytest.raises(YamlLimitError, match=r"^r.yaml:3: invalid YAML: recursive alias '\*a'"):
        check_yaml_text("--- &a\nname: x\nself: *a\n", "r.yaml")
    with pytest.raises(ConfigError, match=r"^r.yaml:1: invalid YAML: recursive alias"):
        parse_yaml("&a {k: [*a]}\n", "r.yaml")


def test_alias_to_a_closed_anchor_of_the_same_document_still_works() -> None:
    data, _ = parse_yaml("a: &a [1]\nb: [*a, *a]\nc: &c {x: 1}\nd: {<<: *c, y: 2}\n", "ok.yaml")
    assert data["b"] == [[1], [1]] and data["d"] == {"x": 1, "y": 2}


def test_recursive_alias_in_set(capsys: pytest.CaptureFixture[str]) -> None:
    msg = validate(capsys, "smoke", "--set", "budget.lr=&a [*a]")
    assert msg == (
        "tokbench: error: --set budget.lr=&a [*a]: cannot read the value as YAML: "
        "recursive alias '*a' (it is inside its own anchor '&a')"
    )


def test_nesting_built_from_aliases_is_bounded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # each anchor is 60 levels deep and holds the previous one: 20 of them would be 1200 levels
    # once built, past Python's recursion limit, though no written line nests deeper than 61
    lines = ["name: x"]
    for k in range(20):
        inner = f"*a{k - 1}" if k else "1"
        lines.append(f"a{k}: &a{k} " + "[" * 60 + inner + "]" * 60)
    (tmp_path / "deep.yaml").write_text("\n".join(lines) + "\n")
    msg = validate(capsys, str(tmp_path / "deep.yaml"))
    assert f"deep.yaml:3: YAML nested deeper than {MAX_DEPTH} levels once alias '*a0'" in msg


def test_alias_nesting_within_the_limit_still_works() -> None:
    half = MAX_DEPTH // 2
    text = "a: &a " + "[" * (half - 1) + "1" + "]" * (half - 1) + "\nb: " + "[" * half + "*a"
    data, _ = parse_yaml(text + "]" * half + "\n", "ok.yaml")  # depth 2 * half = MAX_DEPTH
    node, depth = data["b"], 0
    while isinstance(node, list):
        node, depth = node[0], depth + 1
    assert node == 1 and depth == 2 * half - 1


# ---------------------------------------------------------------------------------------------
# 2. --param is read like --set: parse errors and alias bombs are one line


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("[", "cannot read the value as YAML: while parsing a flow node"),
        ("&a [*a]", "cannot read the value as YAML: recursive alias '*a'"),
        ("!!python/name:os.system", "cannot read the value as YAML: could not determine"),
    ],
)
def test_param_value_errors(value: str, problem: str, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["perturb", "typo.keyboard", "--text", "hi", "--param", f"layout={value}"]) == 2
    msg = one_error_line(capsys)
    assert msg.startswith(f"tokbench: error: --param 'layout={value}': {problem}"), msg


def test_param_alias_bomb_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    bomb = "[" + ", ".join(
        [f"&a0 [{', '.join(['x'] * 10)}]"]
        + [f"&a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 8)]
    ) + "]"
    capsys.readouterr()
    assert main(["perturb", "typo.keyboard", "--text", "hi", "--param", f"layout={bomb}"]) == 2
    assert "expands to more than" in one_error_line(capsys)


def test_param_values_still_parse(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["perturb", "typo.keyboard", "--text", "hello", "--param", "layout=en",
                 "--severity", "0"]) == 0
    assert "hello" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------
# 3. and 4. include: and the suite path name what they are, with file and line


def test_nul_byte_in_include(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "x.yaml").write_text('name: x\ninclude: "a\\0b"\n')
    msg = validate(capsys, str(tmp_path / "x.yaml"))
    assert "x.yaml:2: include: cannot use included file 'a\\x00b': embedded null byte" in msg


@pytest.mark.parametrize(
    ("target", "what"), [(".", "is a directory"), ("/dev/zero", "is not a regular file")]
)
def test_include_of_a_non_file(
    target: str, what: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "x.yaml").write_text(f"include: [{target}]\n")
    msg = validate(capsys, str(tmp_path / "x.yaml"))
    assert f"x.yaml:1: include[0]: included file '{target}' {what}" in msg


def test_include_not_found_is_unchanged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "x.yaml").write_text("include: nope.yaml\n")
    assert "x.yaml:1: include: included file 'nope.yaml' not found" in validate(
        capsys, str(tmp_path / "x.yaml")
    )


def test_suite_path_is_a_directory_or_a_device(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    msg = validate(capsys, f"{tmp_path}/")
    assert msg == f"tokbench: error: suite {tmp_path}/: is a directory, not a suite file"
    msg = validate(capsys, "/dev/null")
    assert msg == "tokbench: error: suite /dev/null: is not a regular file"
    assert "suite file not found: " in validate(capsys, str(tmp_path / "nope.yaml"))
    assert "the name is empty" in validate(capsys, "")


def test_loader_refuses_a_non_file_itself(tmp_path: Path) -> None:
    from harness.config.loader import read_suite_file

    with pytest.raises(ConfigError, match=r": is a directory, not a suite file$"):
        read_suite_file(tmp_path, ())
    with pytest.raises(ConfigError, match=r"^/dev/zero: is not a regular file$"):
        read_suite_file(Path("/dev/zero"), ())


def test_huge_suite_file_is_refused_unread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    big = tmp_path / "big.yaml"
    with open(big, "wb") as f:
        f.truncate(4 * MAX_TEXT_CHARS + 1)  # sparse: no disk used, and never read
    msg = validate(capsys, str(big))
    assert f"big.yaml:1: the suite file is {4 * MAX_TEXT_CHARS + 1:,} bytes; the limit is" in msg


# ---------------------------------------------------------------------------------------------
# 4. an empty --set value is located at the --set argument


def test_empty_set_value_is_located_at_the_argument(capsys: pytest.CaptureFixture[str]) -> None:
    msg = validate(capsys, "smoke", "--set", "name=")
    assert msg == "tokbench: error: --set name=: name: expected a string, got null"


# ---------------------------------------------------------------------------------------------
# 4. report numbers are checked before any file is read, naming the option


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--seed", "-1"], "--seed -1: must be >= 0"),
        (["--bootstrap", "-5"], "--bootstrap -5: must be between 1 and"),
        (["--bootstrap", "0"], "--bootstrap 0: must be between 1 and"),
        (["--bootstrap", str(MAX_BOOTSTRAP + 1)], f"--bootstrap {MAX_BOOTSTRAP + 1}: must be"),
    ],
)
@pytest.mark.parametrize("command", ["report", "report2", "compare"])
def test_report_numbers(
    command: str, args: list[str], problem: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    runs = {"report": [str(tmp_path)], "report2": [str(tmp_path)] * 2}
    runs["compare"] = runs["report2"]
    argv = ["compare" if command == "compare" else "report", *runs[command], *args]
    if command != "report":
        argv += ["--out", str(tmp_path / "out")]
    capsys.readouterr()
    assert main(argv) == 2
    assert one_error_line(capsys).startswith(f"tokbench: error: {problem}")

