"""Mimi: latents <-> 24 kHz audio.

Decoding is streaming and batched: :class:`DecoderState` holds, per stream row, the
conv carry-overs and a ring of the decoder transformer's attention window. Decoding
N frames in one call equals N one-frame calls. Encoding (for voice cloning) runs a
whole clip at once.

The decoder computes in ``decoder_dtype`` (float32 unless
``engines.pocket.decoder_precision`` made it bf16), and so does its state; latents go
in and audio comes out as float32 whatever it is.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from engines.pocket.geometry import MimiTransformerGeometry, PocketGeometry
from engines.pocket.kernels import Linear
from engines.pocket.kv_cache import RingKvCache
from engines.pocket.layers import CausalWindow, Transformer
from engines.pocket.seanet import SeanetDecoder, SeanetEncoder
from engines.pocket.streaming_conv import ConvState, StreamingConv, StreamingConvTranspose


class _ProjectedTransformer(nn.Module):
    def __init__(self, g: MimiTransformerGeometry) -> None:
        super().__init__()
        self.geometry = g
        self.transformer = Transformer(g.num_layers, g.d_model, g.num_heads, g.num_heads,
                                       g.d_model // g.num_heads, g.ff_dim, g.max_period,
                                       layer_scale=True)
        self.input_proj = (Linear(g.input_dim, g.d_model, bias=False)
                           if g.input_dim != g.d_model else None)
        self.output_projs = nn.ModuleList(
            [Linear(g.d_model, g.output_dim, bias=False) if g.output_dim != g.d_model
             else nn.Identity()])

    def forward(self, x: torch.Tensor, pos_q: torch.Tensor, store) -> torch.Tensor:
        """[B, C, T] -> [B, C', T]."""
        return self.channels_last(x.transpose(1, 2), pos_q, store).transpose(1, 2)

    def channels_last(self, x: torch.Tensor, pos_q: torch.Tensor, store) -> torch.Tensor:
        """[B, T, C] -> [B, T, C']."""
        if self.input_proj is not None:
            x = self.input_proj(x)
        return self.output_projs[0](self.transformer(x, pos_q, store))


class _Quantizer(nn.Module):
    def __init__(self, latent_dim: int, out_dim: int) -> None:
        super().__init__()
        self.output_proj = nn.Conv1d(latent_dim, out_dim, 1, bias=False)


class _Resample(nn.Module):
    """Holder that gives the resampling conv its checkpoint key (``upsample.convtr...``)."""


@dataclass
class DecoderState:
    """Streaming state of the decoder for ``rows`` streams."""

    upsample: torch.Tensor  # [rows, C, carry] of the transposed-conv upsampler
    convs: ConvState  # the SEANet decoder's, channels last ([rows, carry, C] each)
    attention: RingKvCache

    def select(self, rows: slice) -> DecoderState:
        return DecoderState(self.upsample[rows], self.convs.select(rows), self.attention.select(rows))

    def reset_row(self, row: int) -> None:
        self.upsample[row].zero_()
        self.convs.reset_row(row)
        self.attention.reset_row(row)

    def copy_row(self, src: int, dst: int) -> None:
        self.upsample[dst] = self.upsample[src]
        self.convs.copy_row(src, dst)
        self.attention.copy_row(src, dst)

    def gather(self, rows: list[int]) -> DecoderState:
        """A copy of the state of ``rows`` (any order); write it back with :meth:`scatter`."""
        index = torch.tensor(rows)
        ring = self.attention
        copy = RingKvCache.over(ring.context, ring.keys[:, index], ring.values[:, index],
                                ring.slot_pos[:, index], ring.steps[index])
        return DecoderState(self.upsample[index], ConvState([t[index] for t in self.convs.tensors]), copy)

    def scatter(self, rows: list[int], part: DecoderState) -> None:
        """Write a :meth:`gather` copy (since advanced) back into ``rows``."""
        index = torch.tensor(rows)
        self.upsample[index] = part.upsample
        for mine, theirs in zip(self.convs.tensors, part.convs.tensors, strict=True):
            mine[index] = theirs
        ring, other = self.attention, part.attention
        ring.keys[:, index], ring.values[:, index] = other.keys, other.values
        ring.slot_pos[:, index], ring.steps[index] = other.slot_pos, other.steps


class Mimi(nn.Module):
    def __init__(self, g: PocketGeometry) -> None:
        super().__init__()
        self.geometry = g
        self.encoder = SeanetEncoder(g.encoder)
        self.decoder = SeanetDecoder(g.decoder)
        self.encoder_transformer = _ProjectedTransformer(g.encoder_transformer)
        self.decoder_transformer = _ProjectedTransformer(g.decoder_transformer)
        self.quantizer = _Quantizer(g.latent_dim, g.outer_dim)
        stride = g.resample_stride
        self.downsample = _Resample()
        self.downsample.conv = StreamingConv(g.encoder.dimension, g.inner_dim, 2 * stride, stride,
                                             bias=False, replicate=True)
        self.upsample = _Resample()
        self.upsample.convtr = StreamingConvTranspose(g.outer_dim, g.decoder.dimension, 2 * stride,
                                                      stride, groups=g.decoder.dimension, bias=False)
        self.decoder_dtype = torch.float32

    def decoder_path(self) -> list[nn.Module]:
        """The modules :meth:`decode` runs, in order."""
        return [self.quantizer, self.upsample, self.decoder_transformer, self.decoder]

    @property
    def frame_samples(self) -> int:
        hop = 1
        for ratio in self.geometry.decoder.ratios:
            hop *= ratio
        return hop * self.geometry.resample_stride

    def new_decoder_state(self, rows: int) -> DecoderState:
        """State for ``rows`` streams. Its attention ring has room for one frame's steps beyond
        the window: with many streams a call decodes one frame each, and a larger ring would make
        those calls attend over, and gather, slots they do not use (a call of more frames attends
        through a copy of the ring)."""
        t = self.geometry.decoder_transformer
        up = self.upsample.convtr
        dtype = self.decoder_dtype
        return DecoderState(
            upsample=torch.zeros(rows, *up.state_shape(), dtype=dtype),
            convs=self.decoder.new_step_state(rows, dtype),
            attention=RingKvCache(t.num_layers, rows, t.context, t.num_heads, t.d_model // t.num_heads, dtype,
                                  spare=self.geometry.resample_stride))

    def decode(self, latents: torch.Tensor, state: DecoderState) -> torch.Tensor:
        """Latents [B, T, latent_dim] -> audio [B, T * frame_samples].

        The latents are in Mimi's scale: the flow head's output * emb_std + emb_mean.
        """
        x = self.quantizer.output_proj(latents.transpose(1, 2).to(self.decoder_dtype))
        x = self.upsample.convtr(x, state.upsample)
        steps = x.shape[-1]
        x = self.decoder_transformer.channels_last(x.transpose(1, 2), state.attention.positions(steps),
                                                   state.attention)
        state.attention.advance(steps)
        return self.decoder.step(x, state.convs)[..., 0].to(torch.float32)

    def encode(self, audio: torch.Tensor) -> torch.Tensor:
        """Audio [B, samples] at 24 kHz -> latents [B, T, inner_dim] (T = ceil(samples / frame))."""
        frame = self.frame_samples
        pad = (-audio.shape[-1]) % frame
        x = torch.nn.functional.pad(audio[:, None, :], (0, pad))
        x = self.encoder(x, None)
        steps = x.shape[-1]
        positions = torch.arange(steps)[None, :].expand(x.shape[0], -1)
        x = self.encoder_transformer(x, positions, CausalWindow(self.geometry.encoder_transformer.context))
        return self.downsample.conv(x, None).transpose(1, 2)
