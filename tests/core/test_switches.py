"""``core.switches.switch``: 1, 0, unset; anything else one error naming the variable."""

from __future__ import annotations

import pytest

from core.switches import switch


def test_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOKBENCH_X", raising=False)
    assert switch("TOKBENCH_X") is None
    for raw, want in (("1", True), ("0", False), (" 1 ", True), ("", None)):
        monkeypatch.setenv("TOKBENCH_X", raw)
        assert switch("TOKBENCH_X") is want
    monkeypatch.setenv("TOKBENCH_X", "yes")
    with pytest.raises(ValueError, match=r"^TOKBENCH_X='yes': expected 0 or 1$"):
        switch("TOKBENCH_X")
