"""A complete Pocket TTS model directory with random weights, in the released layout.

What the tests, the benchmarks and anyone without the real weights use to run
the whole pipeline: ``model.safetensors`` (the reference ``TTSModel.state_dict()``
key names and shapes), a sentencepiece unigram ``tokenizer.model`` trained here
on a synthetic English-like corpus, and two voices ``embeddings/<name>.safetensors``
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

import io
import math
import os
import random
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path

import torch

from engines.files import replace_dir
from engines.pocket.geometry import (
    MimiTransformerGeometry,
    PocketGeometry,
    SeanetGeometry,
    detect_geometry,
)

VOICE_NAMES = ("alba", "marius")
EOS_BIAS = -6.0
OUTPUT_GAIN = 0.1
LATENT_DIM = 32  # Mimi quantizer dimension: the flow LM's latent width
TIME_FREQ_DIM = 256  # TimestepEmbedder frequency_embedding_size (half of it are freqs)


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


# ---- key/shape layout -------------------------------------------------------------


def checkpoint_layout(g: PocketGeometry) -> dict[str, tuple[int, ...]]:
    """Every key of ``TTSModel.state_dict()`` for geometry ``g`` with its shape, in order.

    Raises ValueError naming the fields when ``g`` is not the released architecture
    (the loader would read these shapes back as a different geometry).
    """
    L, D, F = g.latent_dim, g.lm_dim, g.flow_dim
    out: dict[str, tuple[int, ...]] = {
        "flow_lm.bos_emb": (L,),
        "flow_lm.bos_before_voice": (1, 1, D),
        "flow_lm.speaker_proj_weight": (D, L),
        "flow_lm.emb_std": (L,),
        "flow_lm.emb_mean": (L,),
        "flow_lm.conditioner.embed.weight": (g.vocab_size + 1, D),
    }
    fn = "flow_lm.flow_net."
    for i in range(2):  # LSD: a start-time and a target-time condition
        out |= {f"{fn}time_embed.{i}.freqs": (TIME_FREQ_DIM // 2,),
                f"{fn}time_embed.{i}.mlp.0.weight": (F, TIME_FREQ_DIM), f"{fn}time_embed.{i}.mlp.0.bias": (F,),
                f"{fn}time_embed.{i}.mlp.2.weight": (F, F), f"{fn}time_embed.{i}.mlp.2.bias": (F,),
                f"{fn}time_embed.{i}.mlp.3.alpha": (F,)}
    out |= {f"{fn}cond_embed.weight": (F, D), f"{fn}cond_embed.bias": (F,),
            f"{fn}input_proj.weight": (F, L), f"{fn}input_proj.bias": (F,)}
    for i in range(g.flow_depth):
        rb = f"{fn}res_blocks.{i}."
        out |= {rb + "in_ln.weight": (F,), rb + "in_ln.bias": (F,),
                rb + "mlp.0.weight": (F, F), rb + "mlp.0.bias": (F,),
                rb + "mlp.2.weight": (F, F), rb + "mlp.2.bias": (F,),
                rb + "adaLN_modulation.1.weight": (3 * F, F), rb + "adaLN_modulation.1.bias": (3 * F,)}
    out |= {f"{fn}final_layer.linear.weight": (L, F), f"{fn}final_layer.linear.bias": (L,),
            f"{fn}final_layer.adaLN_modulation.1.weight": (2 * F, F),
            f"{fn}final_layer.adaLN_modulation.1.bias": (2 * F,),
            "flow_lm.input_linear.weight": (D, L)}
    out |= _transformer_layout("flow_lm.transformer.", D, g.lm_ff_dim, g.lm_layers, layer_scale=False)
    out |= {"flow_lm.out_norm.weight": (D,), "flow_lm.out_norm.bias": (D,),
            "flow_lm.out_eos.weight": (1, D), "flow_lm.out_eos.bias": (1,)}
    out |= _seanet_encoder_layout(g.encoder)
    out |= _seanet_decoder_layout(g.decoder)
    for side, t in (("encoder", g.encoder_transformer), ("decoder", g.decoder_transformer)):
        out |= _transformer_layout(f"mimi.{side}_transformer.transformer.", t.d_model, t.ff_dim,
                                   t.num_layers, layer_scale=True)
    out |= {"mimi.quantizer.output_proj.weight": (g.outer_dim, L, 1),
            "mimi.downsample.conv.conv.weight": (L, g.outer_dim, 2 * g.resample_stride),
            "mimi.upsample.convtr.convtr.weight": (g.outer_dim, 1, 2 * g.resample_stride)}
    _check_reads_back(g, out)
    return out


def _check_reads_back(g: PocketGeometry, layout: dict[str, tuple[int, ...]]) -> None:
    # The head width is in no weight shape: the loader takes it from a voice file,
    # which random_voice_state writes from g.
    back = detect_geometry(layout, lm_head_dim=g.lm_head_dim)
    if back == g:
        return
    wrong = [f"{f.name}={getattr(g, f.name)!r} (reads back as {getattr(back, f.name)!r})"
             for f in fields(g) if getattr(g, f.name) != getattr(back, f.name)]
    raise ValueError("geometry is not the released Pocket TTS architecture: " + "; ".join(wrong))


def _transformer_layout(prefix: str, d: int, ffn: int, layers: int, *,
                        layer_scale: bool) -> dict[str, tuple[int, ...]]:
    out: dict[str, tuple[int, ...]] = {}
    for i in range(layers):
        p = f"{prefix}layers.{i}."
        out |= {p + "self_attn.in_proj.weight": (3 * d, d), p + "self_attn.out_proj.weight": (d, d),
                p + "norm1.weight": (d,), p + "norm1.bias": (d,), p + "norm2.weight": (d,), p + "norm2.bias": (d,),
                p + "linear1.weight": (ffn, d), p + "linear2.weight": (d, ffn)}
        if layer_scale:
            out |= {p + "layer_scale_1.scale": (d,), p + "layer_scale_2.scale": (d,)}
    return out


def _conv(out: dict[str, tuple[int, ...]], name: str, shape: tuple[int, ...]) -> None:
    out[name + ".weight"] = shape
    out[name + ".bias"] = (shape[0],) if name.endswith(".conv") else (shape[1],)


def _seanet_encoder_layout(s: SeanetGeometry) -> dict[str, tuple[int, ...]]:
    out: dict[str, tuple[int, ...]] = {}
    p = "mimi.encoder.model."
    _conv(out, f"{p}0.conv", (s.n_filters, s.channels, s.kernel_size))
    idx, ch = 1, s.n_filters
    for ratio in reversed(s.ratios):
        _conv(out, f"{p}{idx}.block.1.conv", (ch // s.compress, ch, s.residual_kernel_size))
        _conv(out, f"{p}{idx}.block.3.conv", (ch, ch // s.compress, 1))
        _conv(out, f"{p}{idx + 2}.conv", (2 * ch, ch, 2 * ratio))
        idx, ch = idx + 3, 2 * ch
    _conv(out, f"{p}{idx + 1}.conv", (s.dimension, ch, s.last_kernel_size))
    return out


def _seanet_decoder_layout(s: SeanetGeometry) -> dict[str, tuple[int, ...]]:
    out: dict[str, tuple[int, ...]] = {}
    p = "mimi.decoder.model."
    ch = s.n_filters * 2 ** len(s.ratios)
    _conv(out, f"{p}0.conv", (ch, s.dimension, s.kernel_size))
    idx = 1
    for ratio in s.ratios:
        _conv(out, f"{p}{idx + 1}.convtr", (ch, ch // 2, 2 * ratio))
        ch //= 2
        _conv(out, f"{p}{idx + 2}.block.1.conv", (ch // s.compress, ch, s.residual_kernel_size))
        _conv(out, f"{p}{idx + 2}.block.3.conv", (ch, ch // s.compress, 1))
        idx += 3
    _conv(out, f"{p}{idx + 1}.conv", (s.channels, ch, s.last_kernel_size))
    return out


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


# ---- tokenizer ------------------------------------------------------------------

_COMMON_WORDS = (
    "the of and to a in is it you that he was for on are with as I his they be at one have this from "
    "or had by hot word but what some we can out other were all there when up use your how said an "
    "each she which do their time if will way about many then them write would like so these her long "
    "make thing see him two has look more day could go come did number sound no most people my over "
    "know water than call first who may down side been now find any new work part take get place made "
    "live where after back little only round man year came show every good me give our under name very "
    "through just form sentence great think say help low line differ turn cause much mean before move "
    "right boy old too same tell does set three want air well also play small end put home read hand "
    "port large spell add even land here must big high such follow act why ask men change went light "
    "kind off need house picture try us again animal point mother world near build self earth father "
    "hello speech voice model stream frame audio gateway weather today tomorrow morning thanks please"
).split()
_ONSETS = ("", "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w",
           "br", "ch", "cl", "dr", "fl", "gr", "pl", "pr", "sh", "sl", "st", "str", "th", "tr", "wh")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "ee", "oo", "ou", "y")
_CODAS = ("", "", "n", "r", "s", "t", "l", "m", "nd", "ng", "nt", "st", "ck", "rd", "ll", "ss")
_PUNCT = (".", ".", ".", "?", "!", ",")


def synthetic_corpus(seed: int, n_sentences: int) -> Iterator[str]:
    """English-like sentences: common words plus pronounceable pseudo-words, Zipf-ish."""
    rng = random.Random(seed)
    pseudo = []
    for _ in range(6000):
        syllables = rng.choice((1, 1, 2, 2, 2, 3, 3, 4))
        pseudo.append("".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS)
                              for _ in range(syllables)))
    lexicon = list(_COMMON_WORDS) + pseudo
    weights = [1.0 / (rank + 1) ** 0.9 for rank in range(len(lexicon))]
    for _ in range(n_sentences):
        words = rng.choices(lexicon, weights=weights, k=rng.randint(3, 18))
        if rng.random() < 0.15:
            words.insert(rng.randrange(len(words)), str(rng.randint(0, 2099)))
        if rng.random() < 0.1:
            words.insert(rng.randrange(len(words)), rng.choice(("don't", "it's", "I'm", "we're", "can't")))
        text = " ".join(words)
        yield text[0].upper() + text[1:] + rng.choice(_PUNCT)


def train_tokenizer(vocab_size: int, seed: int) -> bytes:
    """A sentencepiece unigram model with exactly ``vocab_size`` pieces, as bytes."""
    import sentencepiece as spm

    # The trainer refuses a vocabulary larger than the corpus supports: ~2.5 MB
    # of text for 4000 pieces, proportionally less for a small vocabulary.
    n_sentences = max(2000, vocab_size * 12)
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=synthetic_corpus(seed, n_sentences), model_writer=buf, vocab_size=vocab_size,
        model_type="unigram", character_coverage=1.0, num_threads=1, shuffle_input_sentence=False,
        input_sentence_size=0, minloglevel=2, hard_vocab_limit=True,
    )
    return buf.getvalue()


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
