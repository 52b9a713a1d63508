"""Float32 matrix products through oneDNN instead of the default BLAS.

torch sends a float32 ``F.linear`` on the CPU to MKL's sgemm. On AMD EPYC (this
project's reference machine) MKL takes a generic code path and reaches about 90
GFLOPS per core, while oneDNN's matmul, which torch ships and uses for its own
fused kernels, reaches about 200 on the same shapes. Results are float32 in both;
only the summation order differs (relative differences around 1e-7).

:func:`linear` is a drop-in for ``F.linear`` and falls back to it where the oneDNN
op is missing (other builds of torch) or does not apply (other dtypes, autograd).

:class:`Int8Matrix` is the opt-in int8 product of Mimi's decoder
(``engines.pocket.decoder_precision``).
"""

from __future__ import annotations

import warnings
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


class Int8Matrix:
    """``linear(x, weight, bias)`` on int8: the weight quantized once, one scale per output
    row; ``x`` quantized at each call, one scale for the whole call (fbgemm's dynamic
    product, float32 in and out).

    ``x`` uses all 8 bits (``reduce_range=False``): safe on VNNI, whose products
    accumulate in 32 bits, while the AVX2 path's 16-bit pair sums can saturate; the
    caller checks the CPU first (``engines.pocket.decoder_precision``). Immutable once made:
    safe for concurrent calls.
    """

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        weight = weight.detach().to(torch.float32)
        self.out_features, self.in_features = weight.shape
        scales = weight.abs().amax(dim=1).clamp_min(1e-12) / 127
        zeros = torch.zeros(self.out_features, dtype=torch.long)
        with warnings.catch_warnings():
            # torch.ao's quantized tensors are deprecated in favour of torchao, not a dependency here
            warnings.filterwarnings("ignore", message=r".*quantize_per_tensor.*deprecated", category=UserWarning)
            quantized = torch.quantize_per_channel(weight, scales, zeros, 0, torch.qint8)
            float_bias = None if bias is None else bias.detach().to(torch.float32)
            self._packed = torch.ops.quantized.linear_prepack(quantized, float_bias)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        y = torch.ops.quantized.linear_dynamic(x.reshape(-1, self.in_features), self._packed, False)
        return y.view(*lead, self.out_features)


class Int8Linear(nn.Module):
    """An ``nn.Linear`` computed by :class:`Int8Matrix` (no parameters left to load)."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.matrix = Int8Matrix(linear.weight, linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.matrix(x)
