"""The streaming Mimi decoder: chunk invariance and independent rows."""

from __future__ import annotations

import pytest
import torch

from engines.pocket.seanet import elu
from engines.pocket.streaming_conv import StreamingConv


def _latents(model, frames: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, frames, model.geometry.latent_dim, generator=g)


@torch.no_grad()
def test_decoding_n_frames_at_once_equals_n_single_frame_calls(tiny_model) -> None:
    mimi = tiny_model.mimi
    # longer than the attention window (50 steps = 3.1 frames here), so the ring wraps
    latents = _latents(tiny_model, 12, seed=0)
    whole = mimi.decode(latents, mimi.new_decoder_state(1))
    state = mimi.new_decoder_state(1)
    pieces = [mimi.decode(latents[:, i : i + 1], state) for i in range(12)]
    assert whole.shape == (1, 12 * 1920)
    torch.testing.assert_close(torch.cat(pieces, dim=1), whole, rtol=0, atol=1e-5)
    state = mimi.new_decoder_state(1)
    uneven = [mimi.decode(latents[:, a:b], state) for a, b in [(0, 5), (5, 6), (6, 12)]]
    torch.testing.assert_close(torch.cat(uneven, dim=1), whole, rtol=0, atol=1e-5)
    # the ring has room for one frame's steps: one-frame calls attend in place, longer ones through a copy
    assert state.attention.slots == state.attention.context + tiny_model.geometry.resample_stride


@pytest.mark.parametrize(("in_ch", "out_ch", "kernel", "dilation"),
                         [(32, 16, 3, 1), (48, 16, 3, 2), (32, 1, 3, 1), (16, 32, 3, 2), (64, 64, 7, 1), (24, 8, 1, 1)],
                         ids=["narrowing", "narrowing-dilated", "to-one-channel", "widening-dilated", "square", "pointwise"])
@pytest.mark.parametrize(("dtype", "atol"), [(torch.float32, 1e-4), (torch.bfloat16, 6e-2)], ids=["fp32", "bf16"])
@torch.no_grad()
def test_a_streamed_conv_equals_torch_conv_over_the_whole_signal(in_ch: int, out_ch: int, kernel: int,
                                                                  dilation: int, dtype: torch.dtype, atol: float) -> None:
    g = torch.Generator().manual_seed(in_ch * 100 + out_ch)
    conv = StreamingConv(in_ch, out_ch, kernel, dilation=dilation).to(dtype)
    signal = torch.randn(3, in_ch, 50, generator=g).to(dtype)
    # the reference in float32 on the same (rounded) numbers
    whole = torch.nn.functional.conv1d(torch.nn.functional.pad(signal.float(), (conv.carry, 0)),
                                       conv.conv.weight.float(), conv.conv.bias.float(), dilation=dilation)
    state = torch.zeros(3, *conv.step_state_shape(), dtype=dtype)
    pieces = [conv.step(signal[..., a:b].transpose(1, 2).contiguous(), state) for a, b in [(0, 1), (1, 17), (17, 50)]]
    streamed = torch.cat(pieces, dim=1).transpose(1, 2)
    assert streamed.dtype == dtype and streamed.shape == whole.shape
    torch.testing.assert_close(streamed.float(), whole, rtol=0, atol=atol)


@pytest.mark.parametrize("inplace", [False, True], ids=["new-tensor", "in-place"])
def test_the_bf16_elu_is_elu(inplace: bool) -> None:
    values = [-float("inf"), -100.0, -3.0, -1.0, -0.25, -1e-3, 0.0, 1e-3, 0.5, 7.0, 300.0, float("inf")]
    x = torch.cat([torch.tensor(values), torch.linspace(-6, 6, 1001)]).to(torch.bfloat16)
    expected = torch.nn.functional.elu(x.float())
    original = x.clone()
    y = elu(x, inplace=inplace)
    assert y.dtype == torch.bfloat16
    assert (y is x) == inplace
    if not inplace:
        assert torch.equal(x, original)
    # within the rounding of bf16 near 1 (exp), where torch's own bf16 ELU errs 2e-3
    torch.testing.assert_close(y.float(), expected, rtol=1e-2, atol=4e-3)
    assert torch.isnan(elu(torch.tensor([float("nan")], dtype=torch.bfloat16))).all()


@torch.no_grad()
def test_rows_with_different_histories_decode_independently(tiny_model) -> None:
    mimi = tiny_model.mimi
    a, b = _latents(tiny_model, 9, seed=1), _latents(tiny_model, 4, seed=2)
    alone_a = mimi.decode(a, mimi.new_decoder_state(1))
    alone_b = mimi.decode(b, mimi.new_decoder_state(1))
    state = mimi.new_decoder_state(2)
    first = mimi.decode(a[:, :5], state.select(slice(0, 1)))  # row 0 is 5 frames ahead
    together = mimi.decode(torch.cat([a[:, 5:9], b]), state)
    torch.testing.assert_close(torch.cat([first, together[:1]], dim=1), alone_a, rtol=0, atol=1e-5)
    torch.testing.assert_close(together[1:], alone_b, rtol=0, atol=1e-5)


@torch.no_grad()
def test_reset_row_starts_from_silence_again(tiny_model) -> None:
    mimi = tiny_model.mimi
    latents = _latents(tiny_model, 3, seed=3)
    state = mimi.new_decoder_state(1)
    fresh = mimi.decode(latents, state)
    state.reset_row(0)
    torch.testing.assert_close(mimi.decode(latents, state), fresh, rtol=0, atol=0)
