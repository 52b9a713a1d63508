"""Float32 matrix products through oneDNN instead of the default BLAS.

torch sends a float32 ``F.linear`` on the CPU to MKL's sgemm. On AMD EPYC (this
project's reference machine) MKL takes a generic code path and reaches about 90
GFLOPS per core, while oneDNN's matmul, which torch ships and uses for its own
fused kernels, reaches about 200 on the same shapes. Results are float32 in both;
only the summation order differs (relative differences around 1e-7).

:func:`linear` is a drop-in for ``F.linear`` and falls back to it where the oneDNN
op is missing (other builds of torch) or does not apply (other dtypes, autograd).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F


def _probe() -> bool:
    op = getattr(getattr(torch.ops, "mkldnn", None), "_linear_pointwise", None)
    if op is None or not torch.backends.mkldnn.is_available():
        return False
    try:
        x, w = torch.randn(3, 5), torch.randn(4, 5)
        return bool(torch.allclose(op(x, w, None, "none", [], ""), x @ w.T, atol=1e-5))
    except (RuntimeError, NotImplementedError):
        return False


ONEDNN_LINEAR = _probe()


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    if (not ONEDNN_LINEAR or x.dtype != torch.float32 or weight.dtype != torch.float32
            or x.device.type != "cpu" or (torch.is_grad_enabled() and weight.requires_grad)):
        return F.linear(x, weight, bias)
    lead = x.shape[:-1]
    y = torch.ops.mkldnn._linear_pointwise(x.reshape(-1, x.shape[-1]), weight, bias, "none", [], "")
    return y.view(*lead, weight.shape[0])


class Linear(nn.Linear):
    """``nn.Linear`` (same parameters and checkpoint keys) computed by :func:`linear`."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias)

    def plain(self) -> nn.Linear:
        """An ``nn.Linear`` sharing these parameters (what torch's quantization accepts)."""
        out = nn.Linear(self.in_features, self.out_features, bias=self.bias is not None)
        out.weight = self.weight
        out.bias = self.bias
        return out


class DerivedTensor:
    """A value computed from a weight (a rearranged copy, a constant activation), kept
    until the weight changes (a new load writes in place and bumps its version)."""

    def __init__(self, derive: Callable[[torch.Tensor], torch.Tensor]) -> None:
        self.derive = derive
        self.key: tuple | None = None
        self.value: torch.Tensor | None = None

    def get(self, weight: torch.Tensor) -> torch.Tensor:
        # inference tensors have no version counter; nothing can load into them in place either
        version = None if weight.is_inference() else weight._version
        key = (weight.data_ptr(), weight.dtype, version)
        if key != self.key or self.value is None:
            with torch.no_grad():
                self.value = self.derive(weight.detach()).contiguous()
            self.key = key
        return self.value
