"""The opt-in bf16 / int8 Mimi decoder: the setting, the refusal, and how far the audio moves.

The numeric tests run on a small Mimi (128-wide decoder and transformer, few filters)
so that int8 has products wide enough to take (engines.pocket.decoder_precision) and
the whole file stays cheap. They switch the capability probe on, so they run on any
CPU (torch emulates bf16 and runs fbgemm's AVX2 path where the instructions are
missing); what the probe says on a real CPU is tested separately.
"""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import pytest
import torch

from engines.pocket import decoder_precision
from engines.pocket.decoder_precision import DecoderPrecisionError, apply_decoder_precision
from engines.pocket.engine import PocketEngine
from engines.pocket.geometry import MimiTransformerGeometry, SeanetGeometry
from engines.pocket.kernels import Int8Linear
from engines.pocket.mimi import Mimi
from engines.pocket.random_checkpoint import PRESETS, random_state_dict
from gateway.config import ConfigError, Settings

FRAMES = 6
# Least SNR (dB) of each precision's audio against fp32 on the same latents, and of
# one call of FRAMES frames against FRAMES one-frame calls. Measured on this Mimi
# (random weights, seed 0): bf16 41.2 and 320 (the same audio in any chunks), int8
# 35.5 and 34.2 (its input scale is taken per call, so chunks move it).
MIN_SNR_DB = {"bf16": 36.0, "int8": 30.0}
BF16_REFUSED = ("VOXGATE_POCKET_DECODER_PRECISION=bf16: this CPU has no bfloat16 instructions (AVX512_BF16 or "
                "AMX) for torch's oneDNN kernels; set it to fp32 (the default)")
INT8_REFUSED = ("VOXGATE_POCKET_DECODER_PRECISION=int8: this CPU has no AVX512_VNNI instructions, or this torch "
                "build no fbgemm int8 kernels; set it to fp32 (the default)")


def _snr_db(audio: torch.Tensor, reference: torch.Tensor) -> float:
    noise = (audio.double() - reference.double()).pow(2).sum()
    return float(10 * torch.log10(reference.double().pow(2).sum() / noise.clamp_min(1e-30)))


@pytest.fixture
def capable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(decoder_precision, "cpu_supports", lambda precision: True)


@pytest.fixture
def incapable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(decoder_precision, "cpu_supports", lambda precision: precision == "fp32")


@pytest.fixture(scope="module")
def small_mimi_weights() -> tuple[object, dict[str, torch.Tensor]]:
    tiny = PRESETS["tiny"].geometry
    seanet = dataclasses.replace(tiny.decoder, dimension=128, n_filters=8)
    mimi = MimiTransformerGeometry(d_model=128, num_layers=1, num_heads=4, ff_dim=256, context=50,
                                   input_dim=128, output_dim=128)
    assert isinstance(seanet, SeanetGeometry)
    g = dataclasses.replace(tiny, encoder=seanet, decoder=seanet, encoder_transformer=mimi,
                            decoder_transformer=mimi, outer_dim=128)
    weights = {k.removeprefix("mimi."): v for k, v in random_state_dict(g, 0).items() if k.startswith("mimi.")}
    return g, weights


def _mimi(small_mimi_weights, precision: str) -> Mimi:
    g, weights = small_mimi_weights
    mimi = Mimi(g)
    mimi.load_state_dict(weights)
    apply_decoder_precision(mimi.eval(), precision)
    return mimi


@pytest.fixture(scope="module")
def latents() -> torch.Tensor:
    return torch.randn(2, FRAMES, 32, generator=torch.Generator().manual_seed(5))


@torch.inference_mode()
def _decode(mimi: Mimi, latents: torch.Tensor, pieces: int) -> torch.Tensor:
    state = mimi.new_decoder_state(latents.shape[0])
    cuts = torch.linspace(0, latents.shape[1], pieces + 1).long().tolist()
    return torch.cat([mimi.decode(latents[:, a:b], state) for a, b in itertools.pairwise(cuts)], dim=1)


# ---- the setting ----------------------------------------------------------------


def test_the_setting_defaults_to_fp32_and_refuses_other_values() -> None:
    assert Settings.from_env({}).pocket_decoder_precision == "fp32"
    with pytest.raises(ConfigError) as refused:
        Settings.from_env({"VOXGATE_POCKET_DECODER_PRECISION": "fp16"})
    assert str(refused.value) == "VOXGATE_POCKET_DECODER_PRECISION='fp16' must be one of: fp32, bf16, int8"


@pytest.mark.usefixtures("capable")
def test_the_setting_takes_bf16_and_int8_where_the_cpu_has_them() -> None:
    assert Settings.from_env({"VOXGATE_POCKET_DECODER_PRECISION": " BF16 "}).pocket_decoder_precision == "bf16"
    assert Settings.from_env({"VOXGATE_POCKET_DECODER_PRECISION": "int8"}).pocket_decoder_precision == "int8"


@pytest.mark.usefixtures("incapable")
def test_a_cpu_without_the_instructions_refuses_at_startup(tmp_path: Path) -> None:
    for precision, message in (("bf16", BF16_REFUSED), ("int8", INT8_REFUSED)):
        with pytest.raises(ConfigError) as refused:
            Settings.from_env({"VOXGATE_POCKET_DECODER_PRECISION": precision})
        assert str(refused.value) == message
        with pytest.raises(DecoderPrecisionError) as engine_refused:
            PocketEngine(tmp_path, tmp_path / "voices", decoder_precision=precision)
        assert str(engine_refused.value) == message
    # a gateway without Pocket has no decoder to refuse
    assert Settings.from_env({"VOXGATE_POCKET_DECODER_PRECISION": "bf16",
                              "VOXGATE_ENGINES": "piper"}).pocket_decoder_precision == "bf16"
    assert PocketEngine(tmp_path, tmp_path / "voices").decoder_precision == "fp32"


@pytest.mark.usefixtures("incapable")
def test_voxgate_serve_refuses_to_start_and_says_why(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from gateway.cli.main import main

    monkeypatch.setenv("VOXGATE_POCKET_DECODER_PRECISION", "bf16")
    assert main(["serve"]) == 2
    assert capsys.readouterr().err == f"voxgate: configuration error: {BF16_REFUSED}\n"


def test_the_engine_refuses_an_unknown_precision(tmp_path: Path) -> None:
    with pytest.raises(DecoderPrecisionError) as refused:
        PocketEngine(tmp_path, tmp_path / "voices", decoder_precision="fp16")
    assert str(refused.value) == "VOXGATE_POCKET_DECODER_PRECISION='fp16': must be one of: fp32, bf16, int8"


def test_the_probe_reads_the_cpu_capabilities(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported", "_is_vnni_supported"):
        monkeypatch.setattr(torch.cpu, name, lambda: False)
    assert [decoder_precision.cpu_supports(p) for p in ("fp32", "bf16", "int8")] == [True, False, False]
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True)  # AMX without AVX512_BF16
    monkeypatch.setattr(torch.cpu, "_is_vnni_supported", lambda: True)
    assert [decoder_precision.cpu_supports(p) for p in ("bf16", "int8")] == [True, True]


# ---- the audio -------------------------------------------------------------------


@pytest.fixture(scope="module")
def fp32_audio(small_mimi_weights, latents: torch.Tensor) -> torch.Tensor:
    return _decode(_mimi(small_mimi_weights, "fp32"), latents, pieces=FRAMES)


@pytest.mark.usefixtures("capable")
@pytest.mark.parametrize("precision", ["bf16", "int8"])
def test_the_audio_stays_near_fp32_and_streams_the_same_in_any_chunks(small_mimi_weights, latents, fp32_audio,
                                                                      precision: str) -> None:
    mimi = _mimi(small_mimi_weights, precision)
    streamed = _decode(mimi, latents, pieces=FRAMES)  # one frame per call, as the scheduler starts
    whole = _decode(mimi, latents, pieces=1)
    assert streamed.dtype == whole.dtype == torch.float32
    assert streamed.shape == fp32_audio.shape == (2, FRAMES * 1920)
    near = _snr_db(streamed, fp32_audio)
    assert MIN_SNR_DB[precision] <= near < 80, f"{precision}: {near:.1f} dB from fp32"  # moved, but not far
    assert _snr_db(whole, streamed) >= MIN_SNR_DB[precision]


@pytest.mark.usefixtures("capable")
def test_bf16_keeps_weights_and_state_in_bf16(small_mimi_weights) -> None:
    mimi = _mimi(small_mimi_weights, "bf16")
    state = mimi.new_decoder_state(3)
    tensors = [state.upsample, state.attention.keys, state.attention.values, *state.convs.tensors]
    assert {t.dtype for t in tensors} == {torch.bfloat16}
    assert {p.dtype for m in mimi.decoder_path() for p in m.parameters()} == {torch.bfloat16}
    assert {p.dtype for p in mimi.encoder.parameters()} == {torch.float32}  # cloning is untouched


@pytest.mark.usefixtures("capable")
def test_int8_takes_the_wide_products_and_leaves_the_waveform_conv_float(small_mimi_weights) -> None:
    mimi = _mimi(small_mimi_weights, "int8")
    linears = [m for m in mimi.decoder_transformer.modules() if isinstance(m, Int8Linear)]
    assert len(linears) == 4  # in_proj, out_proj, linear1, linear2 of its one layer
    convs = mimi.decoder.streaming_modules()
    assert convs[0].int8 is not None  # 7 taps x 128 channels in, 64 out
    assert convs[-1].int8 is None  # the waveform
    state = mimi.new_decoder_state(1)
    assert state.upsample.dtype == state.convs.tensors[0].dtype == torch.float32


@pytest.mark.usefixtures("capable")
async def test_the_engine_serves_audio_in_the_chosen_precision(tiny_model_dir: Path, tmp_path: Path) -> None:
    engine = PocketEngine(tiny_model_dir, tmp_path / "voices", threads=1, max_streams=2, decoder_precision="bf16")
    await engine.load()
    try:
        assert engine._model.mimi.decoder_dtype is torch.bfloat16
        frames = []
        async for frame in engine.open_stream("Hello there.", None).frames():
            frames.append(frame)
            if len(frames) == 2:
                break
        assert [(f.dtype, f.shape) for f in frames] == [(frames[0].dtype, (1920,))] * 2
        assert frames[0].dtype.name == "float32"
    finally:
        await engine.close()
