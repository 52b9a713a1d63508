"""A complete Pocket TTS model directory with random weights, in the released layout.

What the tests, the benchmarks and anyone without the real weights use to run
the whole pipeline: ``model.safetensors`` (the reference ``TTSModel.state_dict()``
key names and shapes, ``engines.pocket.checkpoint_layout``), a sentencepiece
unigram ``tokenizer.model`` trained on a synthetic English-like corpus
(``engines.pocket.synthetic_tokenizer``), and two voices ``embeddings/<name>.safetensors``
(per-layer flow-LM KV cache ``[2, 1, T, H, D]`` plus an int64 ``offset``, the
layout the reference's voice export writes).

Two presets: ``english`` (the released 6-layer English model, 109.5M values) and
``tiny`` (the same architecture a few hundred times smaller, for fast tests). Each
holds a :class:`PocketGeometry`, the same description the loader's
:func:`detect_geometry` reads off a checkpoint, and :func:`checkpoint_layout` only
accepts a geometry that reads back as itself.

How the random init is scaled, and why:
- Linear and conv weights are N(0, 1/fan_in), so activations keep unit scale
  through every layer; the residual branches of the transformers are further
  scaled by 1/sqrt(2 * layers) so the stream does not blow up with depth.
- Norm gains are 1 and biases 0; ``freqs`` buffers hold the values the
  reference computes (sinusoid frequencies), not noise.
- The EOS head: ``out_eos`` reads the LayerNorm'd backbone output, so with
  weight std ``1/sqrt(lm_dim)`` the EOS logit wanders frame to frame around
  ``EOS_BIAS`` (measured on the english geometry, seed 0: mean -5.5, std 0.65
  with ``EOS_BIAS`` = -6.0). That is ~1% per frame above the -4.0 threshold: a
  short text usually runs to the reference's length cap (tokens / 3 + 2 seconds,
  so audio length grows with the text) and a longer one often stops on EOS
  first, so both ways of ending an utterance are exercised.
- The decoder's last conv (to the waveform) is scaled by ``OUTPUT_GAIN`` so the
  random audio has an RMS near 0.1 instead of clipping.
- Voice KV caches are N(0, 1) (the scale of K and V projected from a unit-scale
  stream); a random rotation is still N(0, 1), so "rope already applied" holds.

Everything is drawn from one ``torch.Generator`` seeded with ``seed`` (and the
corpus from ``random.Random(seed)``), so a seed gives the same files byte for byte.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from engines.files import replace_dir
from engines.pocket.checkpoint_layout import TIME_FREQ_DIM, checkpoint_layout
from engines.pocket.geometry import MimiTransformerGeometry, PocketGeometry, SeanetGeometry
from engines.pocket.synthetic_tokenizer import train_tokenizer

VOICE_NAMES = ("alba", "marius")
EOS_BIAS = -6.0
OUTPUT_GAIN = 0.1
LATENT_DIM = 32  # Mimi quantizer dimension: the flow LM's latent width


@dataclass(frozen=True)
class Preset:
    """A random model to write: its sizes, and the length of its voice prompts.

    ``voice_frames`` (BOS + prompt frames in each voice's KV cache) is a property of
    the voice files, not of the model, so it is not part of the geometry.
    """

    geometry: PocketGeometry
    voice_frames: int


def _released_architecture(*, lm_dim: int, lm_heads: int, lm_layers: int, lm_ff_dim: int, vocab_size: int,
                           flow_dim: int, flow_depth: int, n_filters: int, mimi_dim: int, mimi_heads: int,
                           mimi_layers: int, mimi_ff_dim: int, mimi_context: int) -> PocketGeometry:
    """The released English model's architecture (LSD flow head, one residual block per
    SEANet stage, Mimi at 12.5 Hz) with the given sizes."""
    seanet = SeanetGeometry(channels=1, dimension=mimi_dim, n_filters=n_filters, ratios=(6, 5, 4),
                            kernel_size=7, residual_kernel_size=3, last_kernel_size=3,
                            n_residual_layers=1, compress=2)
    mimi = MimiTransformerGeometry(d_model=mimi_dim, num_layers=mimi_layers, num_heads=mimi_heads,
                                   ff_dim=mimi_ff_dim, context=mimi_context, input_dim=mimi_dim,
                                   output_dim=mimi_dim)
    return PocketGeometry(
        latent_dim=LATENT_DIM, lm_dim=lm_dim, lm_layers=lm_layers, lm_heads=lm_heads, lm_kv_heads=lm_heads,
        lm_head_dim=lm_dim // lm_heads, lm_ff_dim=lm_ff_dim, vocab_size=vocab_size, text_rank=None,
        z_dim=None, flow_dim=flow_dim, flow_depth=flow_depth, flow_type="lsd", bos_before_voice=True,
        speaker_dim=LATENT_DIM, encoder=seanet, decoder=seanet, encoder_transformer=mimi,
        decoder_transformer=mimi, inner_dim=LATENT_DIM, outer_dim=mimi_dim,
        resample_stride=16)  # 24000 / prod(ratios) = 200 Hz -> 12.5 Hz


PRESETS: dict[str, Preset] = {
    "english": Preset(_released_architecture(
        lm_dim=1024, lm_heads=16, lm_layers=6, lm_ff_dim=4096, vocab_size=4000, flow_dim=512, flow_depth=6,
        n_filters=64, mimi_dim=512, mimi_heads=8, mimi_layers=2, mimi_ff_dim=2048, mimi_context=250),
        voice_frames=51),
    # Mimi's head count and window are not in any shape: these are what the loader
    # assumes at width 32 (see engines/pocket/geometry.py).
    "tiny": Preset(_released_architecture(
        lm_dim=64, lm_heads=2, lm_layers=2, lm_ff_dim=128, vocab_size=200, flow_dim=64, flow_depth=2,
        n_filters=4, mimi_dim=32, mimi_heads=1, mimi_layers=1, mimi_ff_dim=64, mimi_context=50),
        voice_frames=9),
}


# ---- values -------------------------------------------------------------------


def random_state_dict(g: PocketGeometry, seed: int) -> dict[str, torch.Tensor]:
    """Random float32 tensors for every key of ``checkpoint_layout(g)`` (see module doc)."""
    gen = torch.Generator().manual_seed(seed)
    residual_scale = {
        "flow_lm.transformer.": 1 / math.sqrt(2 * g.lm_layers),
        "mimi.encoder_transformer.": 1 / math.sqrt(2 * max(1, g.encoder_transformer.num_layers)),
        "mimi.decoder_transformer.": 1 / math.sqrt(2 * max(1, g.decoder_transformer.num_layers)),
    }
    out = {}
    for key, shape in checkpoint_layout(g).items():
        out[key] = _init_tensor(key, shape, gen, residual_scale)
    half = TIME_FREQ_DIM // 2
    # Python's exp, not torch's: torch hands float32 exp to MKL, whose result differs
    # in the last bit between Intel and AMD CPUs, and a seed must name the same bytes
    # on every machine.
    freqs = torch.tensor([math.exp(-math.log(10000) * i / half) for i in range(half)], dtype=torch.float32)
    for i in range(2):
        out[f"flow_lm.flow_net.time_embed.{i}.freqs"] = freqs.clone()
    out["flow_lm.out_eos.weight"] = torch.randn((1, g.lm_dim), generator=gen) / math.sqrt(g.lm_dim)
    out["flow_lm.out_eos.bias"] = torch.full((1,), EOS_BIAS)
    return out


def _init_tensor(key: str, shape: tuple[int, ...], gen: torch.Generator,
                 residual_scale: dict[str, float]) -> torch.Tensor:
    leaf = key.rsplit(".", 1)[-1]
    if key.endswith("emb_std"):
        return 0.5 + torch.rand(shape, generator=gen)
    if key.endswith("emb_mean"):
        return 0.1 * torch.randn(shape, generator=gen)
    if key.endswith(("layer_scale_1.scale", "layer_scale_2.scale")):
        return torch.full(shape, 0.01)  # the released config's layer_scale
    if leaf in ("alpha",) or (leaf == "weight" and len(shape) == 1):
        return torch.ones(shape)  # norm gains
    if leaf == "bias":
        return torch.zeros(shape)
    if len(shape) == 1 or key.endswith(("bos_before_voice", "embed.weight")):
        return torch.randn(shape, generator=gen)  # embeddings and BOS vectors: unit scale
    if key.endswith("adaLN_modulation.1.weight"):
        # Modulation (shift, scale, gate) of the flow head: small, so it perturbs
        # the residual stream instead of replacing it.
        return 0.1 * torch.randn(shape, generator=gen) / math.sqrt(shape[1])
    fan_in = _fan_in(key, shape)
    std = 1 / math.sqrt(fan_in)
    if key.endswith(("out_proj.weight", "linear2.weight")):
        std *= next(scale for prefix, scale in residual_scale.items() if key.startswith(prefix))
    if key.startswith("mimi.decoder.model.") and shape[0] == 1:
        std *= OUTPUT_GAIN  # the waveform conv: keep the noise well inside [-1, 1]
    return torch.randn(shape, generator=gen) * std


def _fan_in(key: str, shape: tuple[int, ...]) -> int:
    if key.endswith("convtr.weight"):
        # A transposed conv (in, out/groups, k, stride = k/2) sums in/groups * 2 taps per output.
        in_ch, _, _k = shape
        groups = in_ch if shape[1] == 1 else 1
        return max(1, (in_ch // groups) * 2)
    if len(shape) == 3:
        return shape[1] * shape[2]
    return shape[1]


def random_voice_state(g: PocketGeometry, frames: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """A voice file's tensors: per flow-LM layer, ``.../cache`` [2,1,T,H,D] and ``.../offset`` [1]."""
    out = {}
    for i in range(g.lm_layers):
        name = f"transformer.layers.{i}.self_attn"
        out[f"{name}/cache"] = torch.randn((2, 1, frames, g.lm_kv_heads, g.lm_head_dim), generator=gen)
        out[f"{name}/offset"] = torch.full((1,), frames, dtype=torch.int64)
    return out


# ---- the directory ----------------------------------------------------------------


def make_random_model_dir(dest: Path, geometry: str = "english", seed: int = 0) -> None:
    """Write a complete random-weight model directory at ``dest`` (see module doc).

    Written into a temporary sibling directory and renamed into place, so ``dest``
    never holds a partial model. An existing ``dest`` is replaced.
    """
    from safetensors.torch import save_file

    if geometry not in PRESETS:
        raise ValueError(f"unknown geometry {geometry!r}; choose one of: {', '.join(PRESETS)}")
    preset = PRESETS[geometry]
    g = preset.geometry
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        save_file(random_state_dict(g, seed), str(tmp / "model.safetensors"))
        (tmp / "tokenizer.model").write_bytes(train_tokenizer(g.vocab_size, seed))
        (tmp / "embeddings").mkdir()
        gen = torch.Generator().manual_seed(seed + 1)
        for name in VOICE_NAMES:
            voice = random_voice_state(g, preset.voice_frames, gen)
            save_file(voice, str(tmp / "embeddings" / f"{name}.safetensors"))
        os.chmod(tmp, 0o755)
        replace_dir(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
