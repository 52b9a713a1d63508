"""Model geometry read off the tensor shapes of a Pocket TTS checkpoint.

Everything that has a shape is taken from the shapes. Three things do not appear in
any shape and follow the released models' conventions:

- attention heads: the flow LM uses 64-wide heads (every release); a voice file, when
  one is present, overrides this with its cache's head count and width. Mimi's
  transformers use 64-wide heads at width 512 and 32-wide heads below (4 heads at 128).
- Mimi's attention context: 250 steps at width 512, 50 below (the small decoders).
- a flow head without time conditions is ``pointwise`` when it is 64 wide (the 2M
  model) and ``drifting`` otherwise (18M, 7M, english_drifting); pass ``flow_type`` to
  :func:`detect_geometry` to force one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

FLOW_TYPES = ("lsd", "flow_matching", "drifting", "pointwise")


@dataclass(frozen=True)
class SeanetGeometry:
    channels: int
    dimension: int
    n_filters: int
    ratios: tuple[int, ...]  # in the decoder's (upsampling) order
    kernel_size: int
    residual_kernel_size: int
    last_kernel_size: int
    n_residual_layers: int
    compress: int
    dilation_base: int = 2


@dataclass(frozen=True)
class MimiTransformerGeometry:
    d_model: int
    num_layers: int
    num_heads: int
    ff_dim: int
    context: int
    input_dim: int
    output_dim: int
    max_period: float = 10000.0


@dataclass(frozen=True)
class PocketGeometry:
    """Every size of a Pocket TTS model (flow LM, flow head, Mimi); see detect_geometry."""

    latent_dim: int
    lm_dim: int
    lm_layers: int
    lm_heads: int
    lm_kv_heads: int
    lm_head_dim: int
    lm_ff_dim: int
    vocab_size: int  # sentencepiece pieces; the embedding table has one more row (padding)
    text_rank: int | None
    z_dim: int | None
    flow_dim: int
    flow_depth: int
    flow_type: str
    bos_before_voice: bool
    speaker_dim: int
    encoder: SeanetGeometry
    decoder: SeanetGeometry
    encoder_transformer: MimiTransformerGeometry
    decoder_transformer: MimiTransformerGeometry
    inner_dim: int  # Mimi latent width fed to the speaker projection
    outer_dim: int  # quantizer output width = upsampler input
    resample_stride: int  # encoder frames per latent frame (16)
    lm_max_period: float = 10000.0

    @property
    def lm_attn_dim(self) -> int:
        return self.lm_heads * self.lm_head_dim

    @property
    def small(self) -> bool:
        """The small configs (18M/7M/2M) project the backbone output to ``z_dim``."""
        return self.z_dim is not None


class GeometryError(ValueError):
    """The tensors do not describe a Pocket TTS model; the message names the key."""


def _shape(shapes: Mapping[str, tuple[int, ...]], key: str) -> tuple[int, ...]:
    if key not in shapes:
        raise GeometryError(f"missing tensor {key!r}")
    return tuple(shapes[key])


def _count(shapes: Mapping[str, tuple[int, ...]], pattern: str) -> int:
    rx = re.compile(pattern)
    found = {int(m.group(1)) for k in shapes if (m := rx.match(k))}
    return max(found) + 1 if found else 0


def _seanet(shapes: Mapping[str, tuple[int, ...]], prefix: str, decoder: bool) -> SeanetGeometry:
    rx = re.compile(re.escape(prefix) + r"(\d+)\.")
    indices = sorted({int(m.group(1)) for k in shapes if (m := rx.match(k))})
    if not indices:
        raise GeometryError(f"missing tensors {prefix}*")
    first = _shape(shapes, f"{prefix}{indices[0]}.conv.weight")
    last = _shape(shapes, f"{prefix}{indices[-1]}.conv.weight")
    ratios: list[int] = []
    res_kernel, compress, res_layers, current_res = 3, 2, 0, 0
    for i in indices[1:-1]:
        block = f"{prefix}{i}.block.1.conv.weight"
        if block in shapes:
            hidden, dim, res_kernel = shapes[block]
            compress = dim // hidden
            current_res += 1
            continue
        key = f"{prefix}{i}.convtr.weight" if decoder else f"{prefix}{i}.conv.weight"
        kernel = _shape(shapes, key)[-1]
        ratios.append(kernel // 2)
        res_layers = max(res_layers, current_res)
        current_res = 0
    res_layers = max(res_layers, current_res)
    if decoder:
        dimension, n_filters = first[1], last[1]
        channels = last[0]
    else:
        dimension, n_filters = last[0], first[0]
        channels = first[1]
        ratios.reverse()  # stored in decoder order, like the reference's config
    return SeanetGeometry(channels=channels, dimension=dimension, n_filters=n_filters,
                          ratios=tuple(ratios), kernel_size=first[-1],
                          residual_kernel_size=res_kernel, last_kernel_size=last[-1],
                          n_residual_layers=res_layers, compress=compress)


def _mimi_transformer(shapes: Mapping[str, tuple[int, ...]], prefix: str) -> MimiTransformerGeometry:
    layers = _count(shapes, re.escape(prefix) + r"transformer\.layers\.(\d+)\.")
    if not layers:
        raise GeometryError(f"missing tensors {prefix}transformer.layers.*")
    d_model = _shape(shapes, f"{prefix}transformer.layers.0.self_attn.out_proj.weight")[0]
    ff_dim = _shape(shapes, f"{prefix}transformer.layers.0.linear1.weight")[0]
    in_proj = shapes.get(f"{prefix}input_proj.weight")
    out_proj = shapes.get(f"{prefix}output_projs.0.weight")
    head_dim = 64 if d_model >= 512 else 32
    return MimiTransformerGeometry(
        d_model=d_model, num_layers=layers, num_heads=d_model // head_dim, ff_dim=ff_dim,
        context=250 if d_model >= 512 else 50,
        input_dim=in_proj[1] if in_proj else d_model,
        output_dim=out_proj[0] if out_proj else d_model)


def detect_geometry(shapes: Mapping[str, tuple[int, ...]], *, flow_type: str | None = None,
                    lm_head_dim: int = 64, lm_kv_heads: int | None = None) -> PocketGeometry:
    """Derive the geometry from ``{key: shape}`` of a ``model.safetensors``."""
    lm_dim, latent_dim = _shape(shapes, "flow_lm.input_linear.weight")
    layers = _count(shapes, r"flow_lm\.transformer\.layers\.(\d+)\.")
    if not layers:
        raise GeometryError("missing tensors flow_lm.transformer.layers.*")
    in_rows = _shape(shapes, "flow_lm.transformer.layers.0.self_attn.in_proj.weight")[0]
    attn_dim = _shape(shapes, "flow_lm.transformer.layers.0.self_attn.out_proj.weight")[1]
    kv_dim = (in_rows - attn_dim) // 2
    if attn_dim % lm_head_dim or kv_dim % lm_head_dim:
        raise GeometryError(f"attention width {attn_dim}/{kv_dim} is not a multiple of "
                            f"the head width {lm_head_dim}")
    heads = attn_dim // lm_head_dim
    kv_heads = lm_kv_heads if lm_kv_heads is not None else kv_dim // lm_head_dim
    embed_rows, embed_cols = _shape(shapes, "flow_lm.conditioner.embed.weight")
    rank = embed_cols if "flow_lm.conditioner.proj.weight" in shapes else None
    z_proj = shapes.get("flow_lm.z_proj.weight")
    flow_dim = _shape(shapes, "flow_lm.flow_net.input_proj.weight")[0]
    time_conds = _count(shapes, r"flow_lm\.flow_net\.time_embed\.(\d+)\.")
    if flow_type is None:
        flow_type = {2: "lsd", 1: "flow_matching"}.get(
            time_conds, "pointwise" if flow_dim == 64 else "drifting")
    if flow_type not in FLOW_TYPES:
        raise GeometryError(f"unknown flow type {flow_type!r}; expected one of {FLOW_TYPES}")
    outer_dim = _shape(shapes, "mimi.quantizer.output_proj.weight")[0]
    inner_dim = _shape(shapes, "mimi.downsample.conv.conv.weight")[0]
    stride = _shape(shapes, "mimi.upsample.convtr.convtr.weight")[-1] // 2
    return PocketGeometry(
        latent_dim=latent_dim, lm_dim=lm_dim, lm_layers=layers, lm_heads=heads,
        lm_kv_heads=kv_heads, lm_head_dim=lm_head_dim,
        lm_ff_dim=_shape(shapes, "flow_lm.transformer.layers.0.linear1.weight")[0],
        vocab_size=embed_rows - 1, text_rank=rank, z_dim=z_proj[0] if z_proj else None,
        flow_dim=flow_dim, flow_depth=_count(shapes, r"flow_lm\.flow_net\.res_blocks\.(\d+)\."),
        flow_type=flow_type, bos_before_voice="flow_lm.bos_before_voice" in shapes,
        speaker_dim=_shape(shapes, "flow_lm.speaker_proj_weight")[1],
        encoder=_seanet(shapes, "mimi.encoder.model.", decoder=False),
        decoder=_seanet(shapes, "mimi.decoder.model.", decoder=True),
        encoder_transformer=_mimi_transformer(shapes, "mimi.encoder_transformer."),
        decoder_transformer=_mimi_transformer(shapes, "mimi.decoder_transformer."),
        inner_dim=inner_dim, outer_dim=outer_dim, resample_stride=stride)
