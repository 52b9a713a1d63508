"""The released Pocket TTS checkpoint's keys and shapes, for a given geometry.

:func:`checkpoint_layout` lists every key of the reference ``TTSModel.state_dict()``
with its shape, in order, and only accepts a geometry that the loader's
:func:`detect_geometry` reads back off those shapes as itself. The random test
checkpoint (``engines.pocket.random_checkpoint``) writes exactly these tensors.
"""

from __future__ import annotations

from dataclasses import fields

from engines.pocket.geometry import PocketGeometry, SeanetGeometry, detect_geometry

TIME_FREQ_DIM = 256  # TimestepEmbedder frequency_embedding_size (half of it are freqs)


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
