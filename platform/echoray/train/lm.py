"""A decoder-only Transformer language model in torch alone (`model.name: transformer_lm`).

Pre-norm blocks (LayerNorm -> causal self-attention -> residual, LayerNorm -> GELU
MLP of 4x width -> residual), learned positions, a final LayerNorm and an output
layer tied to the token embedding. Attention is torch's
`scaled_dot_product_attention(is_causal=True)`, so position t sees positions <= t
only: a later token never changes an earlier position's logits. Input: int token
ids (batch, T) with T <= context; output: logits (batch, T, vocab). Dropout
(model.dropout) acts on attention weights, residual branches and embeddings: the
source of the differences between batch-augmentation copies of one sequence.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, width: int, heads: int, dropout: float):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
        self.drop = nn.Dropout(dropout)

    def attend(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop(self.attend(self.ln1(x)))
        return x + self.drop(self.mlp(self.ln2(x)))


class TransformerLM(nn.Module):
    def __init__(self, vocab: int, context: int, width: int, layers: int, heads: int, dropout: float):
        super().__init__()
        if width % heads:
            raise ValueError(f"model.width ({width}) must be a multiple of model.heads ({heads})")
        self.context = context
        self.embed = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(context, width)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(width, heads, dropout) for _ in range(layers))
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.embed.weight  # tied
        self.apply(self._init)
        for name, p in self.named_parameters():  # GPT-2's scaled init of residual projections
            if name.endswith("proj.weight") or name.endswith("mlp.2.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * layers))

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, nn.Linear | nn.Embedding):
            nn.init.normal_(m.weight, 0.0, 0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        t = ids.shape[1]
        if t > self.context:
            raise ValueError(f"sequence of {t} tokens is longer than the model's context {self.context}")
        x = self.drop(self.embed(ids) + self.pos(torch.arange(t, device=ids.device)))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy (nats per token) over (batch, T, vocab) logits."""
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


def split_tokens(tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A packed batch (B, seq_len + 1) -> inputs (B, seq_len) and next-token targets, int64."""
    tokens = tokens.long()
    return tokens[:, :-1], tokens[:, 1:]
