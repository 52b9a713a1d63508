"""The fast paths: oneDNN products, channels-last SEANet convs, cached derived tensors."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from engines.pocket import kernels
from engines.pocket.batch_decode import _DecodeJob
from engines.pocket.decode_tasks import DecodeGroup
from engines.pocket.flow_head import FlowHead
from engines.pocket.kernels import DerivedTensor, Linear, linear
from engines.pocket.streaming_conv import StreamingConv, StreamingConvTranspose


def _rand(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_onednn_products_are_available_on_this_build() -> None:
    # Without them every float32 product silently falls back to the slower BLAS path.
    assert kernels.ONEDNN_LINEAR


@pytest.mark.parametrize("shape", [(7, 48), (3, 5, 48), (2, 3, 4, 48)])
@pytest.mark.parametrize("bias", [False, True])
def test_linear_equals_torch_linear(shape: tuple[int, ...], bias: bool) -> None:
    x, w = _rand(*shape, seed=1), _rand(40, 48, seed=2)
    b = _rand(40, seed=3) if bias else None
    torch.testing.assert_close(linear(x, w, b), F.linear(x, w, b), rtol=1e-5, atol=1e-5)


def test_linear_takes_torch_path_for_other_dtypes_and_for_autograd() -> None:
    x, w = _rand(4, 8).bfloat16(), _rand(6, 8).bfloat16()
    assert linear(x, w).dtype == torch.bfloat16
    weight = torch.nn.Parameter(_rand(6, 8))
    y = linear(_rand(4, 8), weight)
    y.sum().backward()  # the oneDNN op has no backward: training must not reach it
    assert weight.grad is not None and weight.grad.shape == (6, 8)


def test_linear_module_keeps_nn_linear_keys_and_converts_to_plain() -> None:
    layer = Linear(8, 6)
    assert set(layer.state_dict()) == {"weight", "bias"}
    plain = layer.plain()
    assert type(plain) is torch.nn.Linear and plain.weight is layer.weight
    x = _rand(3, 8)
    with torch.no_grad():
        torch.testing.assert_close(layer(x), plain(x), rtol=1e-5, atol=1e-6)


def test_derived_tensor_is_rebuilt_when_the_weight_is_loaded_again() -> None:
    weight = torch.nn.Parameter(_rand(3, 4))
    calls = []
    derived = DerivedTensor(lambda w: (calls.append(1), w.t())[1])
    first = derived.get(weight)
    assert derived.get(weight) is first and len(calls) == 1
    with torch.no_grad():
        weight.copy_(_rand(3, 4, seed=9))  # what load_state_dict does
    torch.testing.assert_close(derived.get(weight), weight.detach().t())
    assert len(calls) == 2


def _stream_channels_last(module, x: torch.Tensor, state: torch.Tensor, splits: list[int]) -> torch.Tensor:
    """Feed ``x`` [B, C, T] to ``module.step`` in pieces; the result back in [B, C, T]."""
    out, start = [], 0
    for size in splits:
        piece = x[..., start : start + size].transpose(1, 2).contiguous()
        out.append(module.step(piece, state).transpose(1, 2))
        start += size
    return torch.cat(out, dim=-1)


@pytest.mark.parametrize(("kernel", "dilation"), [(7, 1), (3, 2), (1, 1)])
@torch.no_grad()
def test_channels_last_conv_step_equals_the_conv_layout(kernel: int, dilation: int) -> None:
    torch.manual_seed(0)
    conv = StreamingConv(16, 24, kernel, dilation=dilation)
    x = _rand(2, 16, 37, seed=4)
    reference = conv(x, torch.zeros(2, *conv.state_shape()))
    state = torch.zeros(2, *conv.step_state_shape())
    streamed = _stream_channels_last(conv, x, state, [1, 10, 3, 23])
    torch.testing.assert_close(streamed, reference, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("stride", "blocks"), [(4, 2), (3, 3), (5, 1)])
@torch.no_grad()
def test_channels_last_transposed_conv_step_equals_the_conv_layout(stride: int, blocks: int) -> None:
    torch.manual_seed(1)
    convtr = StreamingConvTranspose(16, 8, blocks * stride, stride)
    x = _rand(2, 16, 19, seed=5)
    reference = convtr(x, torch.zeros(2, *convtr.state_shape()))
    state = torch.zeros(2, *convtr.step_state_shape())
    streamed = _stream_channels_last(convtr, x, state, [1, 7, 11])
    assert streamed.shape == (2, 8, 19 * stride)
    torch.testing.assert_close(streamed, reference, rtol=1e-5, atol=1e-5)


def test_channels_last_step_refuses_layouts_it_does_not_implement() -> None:
    strided = StreamingConv(4, 4, 4, stride=2)
    with pytest.raises(ValueError, match="stride-1, ungrouped"):
        strided.step(torch.zeros(1, 6, 4), torch.zeros(1, *strided.step_state_shape()))
    depthwise = StreamingConvTranspose(4, 4, 4, 2, groups=4, bias=False)
    with pytest.raises(ValueError, match="ungrouped transposed"):
        depthwise.step(torch.zeros(1, 3, 4), torch.zeros(1, *depthwise.step_state_shape()))


@torch.no_grad()
def test_flow_head_cached_time_condition_equals_per_row_times() -> None:
    torch.manual_seed(2)
    head = FlowHead(latent_dim=8, dim=32, cond_dim=16, depth=2, flow_type="lsd")
    cond, x = _rand(3, 16, seed=6), _rand(3, 8, seed=7)
    ones = torch.ones(3, 1)
    per_row = head.velocity(cond, x, 0.25 * ones, 0.75 * ones)
    torch.testing.assert_close(head.velocity(cond, x, 0.25, 0.75), per_row, rtol=1e-5, atol=1e-6)
    with torch.no_grad():  # new weights: the cached condition follows them
        head.time_embed[0].mlp[0].weight.mul_(2)
        head.time_embed[0].mlp[3].alpha.mul_(2)
    torch.testing.assert_close(head.velocity(cond, x, 0.25, 0.75),
                               head.velocity(cond, x, 0.25 * ones, 0.75 * ones), rtol=1e-5, atol=1e-6)


def test_decode_job_runs_every_group_once_across_threads() -> None:
    seen: list[int] = []
    lock = threading.Lock()

    def decode(group: DecodeGroup) -> dict[int, np.ndarray]:
        with lock:
            seen.append(group.rows[0])
        return {group.stream_ids[0]: np.full(1, group.rows[0] * 10.0)}

    groups = [DecodeGroup([g], [1000 + g], [False], torch.zeros(1, 1, 2), None) for g in range(50)]
    job = _DecodeJob(groups, decode)
    results: list[dict] = []
    threads = [threading.Thread(target=lambda back=back: results.append(job.run(from_back=back)))
               for back in (False, True, False)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    merged = {k: float(v[0]) for part in results for k, v in part.items()}
    assert sorted(seen) == list(range(50))
    assert merged == {1000 + g: g * 10.0 for g in range(50)}
    assert len(job.timings) == 50
    assert job.run() == {}  # nothing left
