"""The streaming convolutions of Mimi's SEANet, causal, one state row per stream.

A streaming conv keeps the last ``kernel - stride`` input samples of each row; a
streaming transposed conv keeps the overlapping tail of its last output. Feeding N
frames at once or one at a time gives the same samples. ``state=None`` runs a whole
signal from silence (the encoder's use).

Two layouts: ``forward`` takes [B, C, T] (torch's conv layout; the encoder), and
``step`` takes [B, T, C] (the streaming decoder). In ``step``:

- a conv that narrows the channels (the residual blocks' kernel-3 convs) runs
  through oneDNN's convolution, fed the [B, T, C] input as the channels-last
  layout of [B, C, T, 1] (no copy either way; the strides must be exactly those
  torch gives that format, see :func:`_channels_last_2d`). At 32 rows of the late
  stages it takes 1.2 ms where summing output-side taps took 12.8 ms in bf16 (the
  sum adds strided slices 16-32 channels wide, which bf16 does slowly) and 2.6
  against 5.1 ms in float32; at one row it is level or a little faster;
- other convs are one matrix product over [B * T] rows: a conv of kernel k
  multiplies the k shifted copies of its input side by side; the last conv (one
  output channel), where oneDNN is slower, multiplies the input once by all k
  taps and sums the k shifted blocks of the product;
- a transposed conv multiplies once and overlap-adds the k / stride blocks of
  each output (torch's transposed conv, channels last or not, is two to three
  times slower at these shapes).

The products go through :func:`engines.pocket.kernels.linear`.

Other precisions (``engines.pocket.decoder_precision``): ``step`` runs in the dtype
of its input and state (bf16 with bf16 weights), and a conv given an ``int8``
matrix multiplies its shifted copies through it instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from engines.pocket.kernels import DerivedTensor, Int8Matrix, linear


def _channels_last_2d(x: torch.Tensor) -> torch.Tensor:
    """[N, L, C] contiguous as [N, C, L, 1] in channels-last memory, with the strides torch
    gives that format (a size-1 dim's stride included: oneDNN reads the layout from all
    four, and with any other value it copies the input to NCHW and takes a slow path)."""
    n, length, channels = x.shape
    return x.as_strided((n, channels, length, 1), (length * channels, 1, channels, channels))


@dataclass
class ConvState:
    """Per-row carry-over of every streaming conv of a network, in module order."""

    tensors: list[torch.Tensor]

    def select(self, rows: slice) -> ConvState:
        return ConvState([t[rows] for t in self.tensors])

    def reset_row(self, row: int) -> None:
        for t in self.tensors:
            t[row].zero_()

    def copy_row(self, src: int, dst: int) -> None:
        for t in self.tensors:
            t[dst] = t[src]


class StreamingConv(nn.Module):
    def __init__(self, in_ch: int, out_ch: int, kernel: int, stride: int = 1, dilation: int = 1,
                 groups: int = 1, bias: bool = True, replicate: bool = False) -> None:
        super().__init__()
        self.conv = nn.Conv1d(in_ch, out_ch, kernel, stride, dilation=dilation, groups=groups, bias=bias)
        self.carry = (kernel - 1) * dilation + 1 - stride
        self.replicate = replicate  # pad the first window with the first sample, not zeros
        # weight [out, in, k] -> [out, k * in], taps side by side as ``step`` lays them out
        self._matrix = DerivedTensor(lambda w: w.permute(0, 2, 1).reshape(w.shape[0], -1))
        self.int8: Int8Matrix | None = None  # ``step``'s product on int8, when set
        # weight [out, in, k] -> [k * out, in]: every tap's product as one output block (``_output_taps``)
        self._taps_matrix = DerivedTensor(lambda w: w.permute(2, 0, 1).reshape(-1, w.shape[1]))
        # weight [out, in, k] -> [out, k, in], which ``_onednn_conv`` views as [out, in, k, 1] channels last
        self._channels_last = DerivedTensor(lambda w: w.permute(0, 2, 1))

    def step_matrix(self) -> torch.Tensor:
        """The weight as ``step`` multiplies it: [out, k * in]."""
        return self._matrix.get(self.conv.weight)

    def state_shape(self) -> tuple[int, int]:
        return (self.conv.in_channels, self.carry)

    def step_state_shape(self) -> tuple[int, int]:
        return (self.carry, self.conv.in_channels)

    def step(self, x: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """Channels last: ``x`` [B, T, C_in], ``state`` [B, carry, C_in] -> [B, T, C_out]."""
        if self.conv.stride[0] != 1 or self.conv.groups != 1:
            raise ValueError("step: only stride-1, ungrouped convs run channels last")
        if self.carry:
            x_full = torch.cat([state, x], dim=1)
            state.copy_(x_full[:, -self.carry:])
        else:
            x_full = x
        kernel, dilation, steps = self.conv.kernel_size[0], self.conv.dilation[0], x.shape[1]
        if kernel > 1 and self.int8 is None and self.conv.out_channels < self.conv.in_channels:
            if self.conv.out_channels > 1:
                return self._onednn_conv(x_full)
            return self._output_taps(x_full, kernel, dilation, steps)
        taps = x_full if kernel == 1 else torch.cat(
            [x_full[:, j * dilation: j * dilation + steps] for j in range(kernel)], dim=-1)
        if self.int8 is not None:
            return self.int8(taps)
        return linear(taps, self.step_matrix(), self.conv.bias)

    def _onednn_conv(self, x_full: torch.Tensor) -> torch.Tensor:
        """The conv as oneDNN computes it, channels last: [B, carry + T, C_in] is the
        channels-last layout of [B, C_in, carry + T, 1], and so is the output."""
        weight = _channels_last_2d(self._channels_last.get(self.conv.weight))
        y = torch.nn.functional.conv2d(_channels_last_2d(x_full.contiguous()), weight, self.conv.bias,
                                       dilation=(self.conv.dilation[0], 1))
        return y.squeeze(-1).transpose(1, 2)

    def _output_taps(self, x_full: torch.Tensor, kernel: int, dilation: int, steps: int) -> torch.Tensor:
        """The same conv with the taps taken on the output side: every tap's product of every
        input step at once ([B, carry + T, k * C_out]), then the k shifted blocks summed."""
        out = self.conv.out_channels
        products = linear(x_full, self._taps_matrix.get(self.conv.weight))
        first = products[:, :steps, :out]
        y = first + self.conv.bias if self.conv.bias is not None else first.clone()
        for j in range(1, kernel):
            y += products[:, j * dilation: j * dilation + steps, j * out:(j + 1) * out]
        return y

    def forward(self, x: torch.Tensor, state: torch.Tensor | None) -> torch.Tensor:
        if self.carry == 0:
            return self.conv(x)
        if state is None:
            first = x[..., :1] if self.replicate else x.new_zeros(x.shape[0], x.shape[1], 1)
            x = torch.cat([first.expand(-1, -1, self.carry), x], dim=-1)
            return self.conv(x)
        x = torch.cat([state, x], dim=-1)
        state.copy_(x[..., -self.carry:])
        return self.conv(x)


class StreamingConvTranspose(nn.Module):
    def __init__(self, in_ch: int, out_ch: int, kernel: int, stride: int, groups: int = 1,
                 bias: bool = True) -> None:
        super().__init__()
        self.convtr = nn.ConvTranspose1d(in_ch, out_ch, kernel, stride, groups=groups, bias=bias)
        self.carry = kernel - stride
        # Mimi's upsampler: one channel per group, two overlapping halves per input step.
        # torch runs it through a slow generic kernel (~1.7 ms per frame at width 512);
        # a broadcast product and one overlap-add is the same sum (bitwise for one frame).
        self._overlap_add = groups == in_ch == out_ch and kernel == 2 * stride and not bias
        # weight [in, out, k] -> [k * out, in]: one product gives every tap of every output
        self._matrix = DerivedTensor(lambda w: w.permute(2, 1, 0).reshape(-1, w.shape[0]))
        self.int8: Int8Matrix | None = None  # ``step``'s product on int8 (bias excluded), when set

    def step_matrix(self) -> torch.Tensor:
        """The weight as ``step`` multiplies it: [k * out, in]."""
        return self._matrix.get(self.convtr.weight)

    def state_shape(self) -> tuple[int, int]:
        return (self.convtr.out_channels, self.carry)

    def step_state_shape(self) -> tuple[int, int]:
        return (self.carry, self.convtr.out_channels)

    def step(self, x: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """Channels last: ``x`` [B, T, C_in], ``state`` [B, carry, C_out] -> [B, T * stride, C_out]."""
        stride, kernel = self.convtr.stride[0], self.convtr.kernel_size[0]
        if self.convtr.groups != 1 or kernel % stride:
            raise ValueError("step: only ungrouped transposed convs with kernel = n * stride run channels last")
        b, steps, _ = x.shape
        blocks, channels = kernel // stride, self.convtr.out_channels
        # parts[:, t, i] lands on output block t + i: blocks overlap-add
        product = self.int8(x) if self.int8 is not None else linear(x, self.step_matrix())
        parts = product.view(b, steps, blocks, stride, channels)
        y = x.new_empty(b, steps + blocks - 1, stride, channels)
        # the bias goes in with the first block of each step, so the output's steps
        # (the first ``steps`` blocks) get it once and the carried tail none
        if self.convtr.bias is not None:
            torch.add(parts[:, :, 0], self.convtr.bias, out=y[:, :steps])
        else:
            y[:, :steps] = parts[:, :, 0]
        y[:, steps:] = 0
        for i in range(1, blocks):
            y[:, i:i + steps] += parts[:, :, i]
        y = y.view(b, (steps + blocks - 1) * stride, channels)
        if self.carry:
            y[:, : self.carry] += state
            state.copy_(y[:, -self.carry:])
            y = y[:, : -self.carry]
        return y

    def _depthwise_overlap_add(self, x: torch.Tensor) -> torch.Tensor:
        b, c, t = x.shape
        stride = self.convtr.stride[0]
        parts = x[..., None] * self.convtr.weight[:, 0][None, :, None, :]  # [B, C, T, 2 * stride]
        y = x.new_zeros(b, c, t + 1, stride)
        y[:, :, :t] = parts[..., :stride]
        y[:, :, 1:] += parts[..., stride:]
        return y.view(b, c, (t + 1) * stride)

    def forward(self, x: torch.Tensor, state: torch.Tensor | None) -> torch.Tensor:
        y = self._depthwise_overlap_add(x) if self._overlap_add else self.convtr(x)
        if self.carry == 0:
            return y
        if state is not None:
            y[..., : self.carry] += state
            tail = y[..., -self.carry:]
            if self.convtr.bias is not None:
                tail = tail - self.convtr.bias[:, None]
            state.copy_(tail)
        return y[..., : -self.carry]
