"""What the PTB language-model workloads share, whatever their framework: the training file, its
tokens and vocabulary, the truncated-BPTT windows over them and the loss summary a result reports.
Standard library only.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

EOS = "<eos>"
LOSS_AVERAGE_STEPS = 5


def train_file(data_dir: str) -> Path:
    """`ptb.train.txt` of the dataset directory; a ValueError that says how to make one if missing."""
    path = Path(data_dir) / "ptb.train.txt"
    if not data_dir or not path.is_file():
        raise ValueError(f"no ptb.train.txt in {data_dir!r}: make one with `sizer data ptb` or point at a PTB copy")
    return path


def read_corpus(path: Path) -> tuple[list[int], dict[str, int]]:
    """Token ids of a PTB-format file and the vocabulary built from it (first occurrence order)."""
    vocab: dict[str, int] = {}
    ids: list[int] = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            for word in line.split() + [EOS]:
                ids.append(vocab.setdefault(word, len(vocab)))
    return ids, vocab


def batch_columns(ids: Sequence[int], batch_size: int, bptt: int, path: Path) -> int:
    """Tokens per column when the corpus is laid out as `batch_size` contiguous columns (batchify);
    a ValueError where that leaves fewer than two windows of `bptt` steps."""
    columns = len(ids) // batch_size
    if columns < 2 * bptt:
        raise ValueError(f"{path} has {len(ids)} tokens, too few for batch {batch_size} x BPTT {bptt}")
    return columns


class BpttWindows:
    """(position, input, target) windows of `bptt` steps over a (steps, batch) token matrix."""

    def __init__(self, data: Any, bptt: int):
        self.data = data
        self.bptt = bptt
        self.steps = len(data)

    def __len__(self) -> int:
        return (self.steps - 2) // self.bptt + 1

    def __iter__(self):
        for i in range(0, self.steps - 1, self.bptt):
            n = min(self.bptt, self.steps - 1 - i)
            yield i, self.data[i : i + n], self.data[i + 1 : i + 1 + n]


def loss_summary(losses: Sequence[float], warmup: int) -> dict[str, float]:
    """The training loss averaged over the first and the last few steps (`loss_start`, `loss_end`),
    over the first few past the warm-up (`loss_start_measured`), the perplexity at the end and the
    steps run."""
    k = min(LOSS_AVERAGE_STEPS, max(1, len(losses) // 3))
    measured = losses[warmup:] if len(losses) > warmup + k else losses
    loss_end = sum(losses[-k:]) / k
    return {
        "loss_start": sum(losses[:k]) / k,
        "loss_end": loss_end,
        "loss_start_measured": sum(measured[:k]) / k,
        "perplexity_end": math.exp(loss_end),
        "train_steps": len(losses),
    }
