"""Held-out scoring of a language model: loss, bits per byte and perplexity.

Every held-out sequence (ids 0..n-1 of the eval split; with source.eval_limit L,
the L ids evenly spaced over 0..n-1, so all held-out documents are sampled) is read and packed once per worker and kept; worker r scores
ids r, r + W, ... and the sums are all-reduced. With nats the summed next-token
loss, T the predicted tokens and B the UTF-8 bytes those tokens spell
(end-of-document: 0 bytes):

    loss = nats / T,  perplexity = exp(nats / T),  bits_per_byte = nats / ln 2 / B

bits per byte does not depend on the tokenizer, so bytes and BPE runs compare.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from echoray.data.sources.base import SourceIndex
from echoray.train.lm import split_tokens


class TextEvalSet:
    def __init__(self, idx: SourceIndex, rank: int, world: int, limit: int | None = None):
        from echoray.data.text.source import TextReader

        reader = TextReader(idx)
        units = np.arange(len(idx.details["eval_units"]))
        rows = reader.read_units("eval", np.zeros(len(units), np.int64), units)
        self.ids = eval_share(len(rows["sample_id"]), limit, rank, world)
        self.tokens = torch.from_numpy(rows["tokens"][self.ids].astype(np.int64))
        self.token_bytes = torch.from_numpy(reader.tokenizer.token_bytes)

    @torch.no_grad()
    def evaluate(self, model: torch.nn.Module, normalize, batch_size: int) -> dict[str, float]:
        """{"eval_loss", "perplexity", "bits_per_byte"} over all workers' shares."""
        was_training = model.training
        model.eval()
        device = next(model.parameters()).device
        sums = torch.zeros(3, dtype=torch.float64)  # nats, tokens, bytes
        for s in range(0, len(self.tokens), batch_size):
            inputs, targets = split_tokens(self.tokens[s : s + batch_size])
            logits = model(inputs.to(device))
            nats = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten().to(device), reduction="sum")
            sums += torch.tensor([float(nats), targets.numel(), float(self.token_bytes[targets].sum())],
                                 dtype=torch.float64)
        model.train(was_training)
        nats, tokens, n_bytes = all_reduce_floats(sums).tolist()
        return scores(nats, tokens, n_bytes)


def eval_share(n: int, limit: int | None, rank: int, world: int) -> np.ndarray:
    """The held-out sequence ids worker `rank` of `world` scores."""
    ids = np.arange(n) if limit is None or limit >= n else np.unique(np.linspace(0, n - 1, limit).round().astype(np.int64))
    return ids[rank::world]


def scores(nats: float, tokens: float, n_bytes: float) -> dict[str, float]:
    loss = nats / max(tokens, 1.0)
    return {"eval_loss": loss, "perplexity": math.exp(min(loss, 700.0)),
            "bits_per_byte": nats / math.log(2) / max(n_bytes, 1.0)}


def all_reduce_floats(t: torch.Tensor) -> torch.Tensor:
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return t
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"
    out = t.to(device)
    dist.all_reduce(out)
    return out.cpu()


def make_evaluator(cfg, idx: SourceIndex, rank: int, world: int):
    """The held-out scorer a worker uses: TextEvalSet for text, EvalSet for images."""
    if idx.kind == "text":
        return TextEvalSet(idx, rank, world, cfg.source.eval_limit)
    from echoray.data.op_shapes import output_size
    from echoray.train.evaluate import EvalSet

    ba = cfg.batch_augmentation
    out_size = output_size(idx.image_size, cfg.preprocess.augment.ops)
    return EvalSet(idx, rank, world, out_size,
                   tta=(cfg.seed, ba.tta_views, cfg.preprocess.augment.ops) if ba.tta_views else None)
