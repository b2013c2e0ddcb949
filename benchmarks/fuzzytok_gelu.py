"""Accuracy of the kernels' GELU (Abramowitz & Stegun 7.1.26 for the normal CDF) against float64.

    .venv/bin/python benchmarks/fuzzytok_gelu.py

Runs on CPU in Triton's interpreter, through the real epilogues: a K = 1 identity convolution, so
each pre-activation is exactly z, with the forward layer epilogue (GELU) and the activation-gradient
epilogue (GELU'). Grid: 48001 points on [−12, 12], signed zeros, tiny values and far tails. Prints
the largest errors against float64 torch, and fp32 torch's own GELU error on the same grid.
``tests/encoders/test_fuzzytok_kernels.py`` asserts bounds on these numbers.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")  # CPU; must precede the kernels' import
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402


def errors() -> dict[str, float]:
    """Largest |error| of the kernels' GELU (absolute, and over 1 + |z|) and GELU' vs float64."""
    from encoders.fuzzytok import kernels as kn

    z = torch.cat([torch.linspace(-12, 12, 48001),
                   torch.tensor([0.0, -0.0, 1e-30, -1e-30, 1e-6, -1e-6, 30.0, -30.0, 1e4, -1e4])])
    C = 8
    n = z.numel() + (-z.numel()) % C
    x = torch.zeros(n)
    x[: z.numel()] = z
    x = x.view(1, n // C, C)
    eye = torch.eye(C).unsqueeze(0)  # the kernels' (K, C_in, C_out) weight layout
    y = kn.launch_conv(x, eye, None, 1, mode=kn.MODE_LAYER, act="gelu", res=torch.zeros_like(x))
    d = kn.launch_conv(x, eye, None, 1, mode=kn.MODE_ACTGRAD, act="gelu", res=torch.ones_like(x))
    zd = z.double()
    want_y = torch.nn.functional.gelu(zd)
    want_d = torch.ops.aten.gelu_backward(torch.ones_like(zd), zd)
    err_y = (y.flatten()[: z.numel()].double() - want_y).abs()
    err_d = (d.flatten()[: z.numel()].double() - want_d).abs()
    return dict(gelu=err_y.max().item(), gelu_rel=(err_y / (1 + zd.abs())).max().item(),
                gelu_grad=err_d.max().item(),
                torch_fp32_gelu=(torch.nn.functional.gelu(z).double() - want_y).abs().max().item())


if __name__ == "__main__":
    for name, value in errors().items():
        print(f"{name:16s} {value:.2e}")
