"""The flow LM backbone: a causal transformer over [text | voice | latents].

Rows of a batch are independent streams with their own cache length
(:class:`RowKvCache`). The text prompt and the voice prompt are written into a row's
cache; then every step feeds one latent per row (NaN = the BOS position) and returns
the condition for the flow head and the raw EOS logit.
"""

from __future__ import annotations

import torch
from torch import nn

from engines.pocket.flow_head import FlowHead
from engines.pocket.geometry import PocketGeometry
from engines.pocket.kernels import Linear
from engines.pocket.kv_cache import RowKvCache
from engines.pocket.layers import Transformer


class _TextTable(nn.Module):
    def __init__(self, vocab_size: int, dim: int, rank: int | None) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size + 1, rank or dim)  # + 1: the padding id
        self.proj = None if rank is None else Linear(rank, dim, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        return x if self.proj is None else self.proj(x)


class FlowLM(nn.Module):
    def __init__(self, g: PocketGeometry) -> None:
        super().__init__()
        self.geometry = g
        self.conditioner = _TextTable(g.vocab_size, g.lm_dim, g.text_rank)
        cond_dim = g.z_dim or g.lm_dim
        self.flow_net = FlowHead(g.latent_dim, g.flow_dim, cond_dim, g.flow_depth, g.flow_type)
        self.register_buffer("emb_std", torch.ones(g.latent_dim))
        self.register_buffer("emb_mean", torch.zeros(g.latent_dim))
        self.bos_emb = nn.Parameter(torch.zeros(g.latent_dim))
        if g.bos_before_voice:
            self.bos_before_voice = nn.Parameter(torch.zeros(1, 1, g.lm_dim))
        self.speaker_proj_weight = nn.Parameter(torch.zeros(g.lm_dim, g.speaker_dim))
        self.input_linear = Linear(g.latent_dim, g.lm_dim, bias=False)
        self.transformer = Transformer(g.lm_layers, g.lm_dim, g.lm_heads, g.lm_kv_heads,
                                       g.lm_head_dim, g.lm_ff_dim, g.lm_max_period)
        self.out_norm = nn.LayerNorm(g.lm_dim, eps=1e-5)
        self.z_proj = None if g.z_dim is None else Linear(g.lm_dim, g.z_dim, bias=False)
        self.out_eos = Linear(cond_dim, 1)

    def new_cache(self, rows: int, capacity: int) -> RowKvCache:
        g = self.geometry
        return RowKvCache(g.lm_layers, rows, capacity, g.lm_kv_heads, g.lm_head_dim)

    def embed_text(self, tokens: list[int]) -> torch.Tensor:
        """[1, T, lm_dim] embeddings of token ids."""
        return self.conditioner(torch.tensor(tokens, dtype=torch.long)[None, :])

    def voice_prompt(self, latents: torch.Tensor) -> torch.Tensor:
        """[1, T(+1), lm_dim] prompt from Mimi latents [1, T, inner_dim] of a voice sample."""
        prompt = torch.nn.functional.linear(latents.to(torch.float32), self.speaker_proj_weight)
        if self.geometry.bos_before_voice:
            prompt = torch.cat([self.bos_before_voice, prompt], dim=1)
        return prompt

    def prompt(self, embeddings: torch.Tensor, cache: RowKvCache) -> None:
        """Write ``embeddings`` [B, T, lm_dim] into the rows of ``cache`` (no output)."""
        self.transformer(embeddings, cache.positions(embeddings.shape[1]), cache)
        cache.advance(embeddings.shape[1])

    def step(self, latents: torch.Tensor, cache: RowKvCache) -> tuple[torch.Tensor, torch.Tensor]:
        """One position per row: latents [B, latent_dim] (NaN rows = BOS).

        Returns the flow-head condition [B, C] and the raw EOS logit [B].
        """
        x = torch.where(torch.isnan(latents), self.bos_emb, latents)
        h = self.transformer(self.input_linear(x)[:, None, :], cache.positions(1), cache)
        cache.advance(1)
        h = self.out_norm(h).to(torch.float32)[:, -1]
        if self.z_proj is not None:
            h = self.z_proj(h)
        return h, self.out_eos(h)[:, 0]
