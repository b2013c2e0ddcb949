"""harness.config.convert: from_mapping on its own (typed validation of any config dataclass)."""

from __future__ import annotations

import pytest
from config_fixtures import FakeConfig, FakeTypo

from harness.config import (
    ConfigError,
    from_mapping,
)

# ---------------------------------------------------------------------------------------------
# from_mapping on its own (the harness uses it for any config dataclass)


def test_from_mapping_generic() -> None:
    cfg = from_mapping(FakeConfig, {"vocab_size": 2e3, "dilations": [3], "scale": 2}, "enc")
    assert cfg == FakeConfig(vocab_size=2000, dilations=(3,), scale=2.0)
    assert isinstance(cfg.scale, float)
    with pytest.raises(ConfigError) as e:
        from_mapping(FakeConfig, {"kind": "c"}, "encoders[0]")
    assert str(e.value) == "encoders[0]: kind: expected one of 'a', 'b', got 'c'"
    with pytest.raises(ConfigError) as e:
        from_mapping(FakeConfig, {"vocab_size": True}, "x")
    assert str(e.value) == "x: vocab_size: expected an int, got true"
    # non-frozen kw_only perturbation dataclasses, with fixed and excluded fields
    p = from_mapping(FakeTypo, {"keys": "azerty"}, "p", exclude=("lang",), fixed={"severity": 0.3})
    assert (p.keys, p.severity, p.lang) == ("azerty", 0.3, None)
    with pytest.raises(ConfigError, match=r"^p: unknown key 'severity'"):
        from_mapping(FakeTypo, {"severity": 1}, "p", fixed={"severity": 0.3})
