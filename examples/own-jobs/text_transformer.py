"""A small Transformer language model trained on raw text that is tokenised on the CPU, inside the
DataLoader's workers: a job as its author would write it, with no knowledge of sizer.

Each sample is a run of consecutive lines of the corpus, read as raw text and tokenised when the
loader asks for it: lower case, accents stripped and control characters dropped character by
character, a regex split into words, numbers and punctuation, and each word mapped to ids through a
vocabulary built from the corpus at start (frequent words whole, the others split WordPiece-style
into the longest known pieces). That is real per-sample CPU work, about what a Python tokenizer
such as BERT's reference one costs (on a 2-vCPU dev host about a million tokens/s per worker). The model is a
`torch.nn.TransformerEncoder` with a causal mask, trained for next-token prediction in bf16
autocast on a GPU (fp32 on the CPU).

It prints its own progress every --log-interval steps, for example

    step 120 | 98,765 tokens/s | loss 6.21

which sizer reads with --metric-regex '(?P<rate>[0-9][0-9,]*(?:\\.[0-9]+)?) tokens/s'.

    python examples/own-jobs/text_transformer.py --data /data/ptb --workers 8
    python examples/own-jobs/text_transformer.py --data /data/ptb --workers 2 --steps 20 \
        --d-model 64 --layers 1 --seq-len 32 --batch-size 4 --device cpu   # a small CPU host
"""

from __future__ import annotations

import argparse
import collections
import itertools
import math
import re
import time
import unicodedata
from pathlib import Path

import torch
from torch import nn

WORD = re.compile(r"<[a-z]+>|'?[a-z]+|\d+(?:[.,]\d+)*|[^\sa-z\d]")
SPECIALS = ("<pad>", "<unk>", "<eos>")
CONTINUATION = "##"  # marks a piece that continues a word, as WordPiece does


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="a text file, or a folder whose *.txt files are read")
    parser.add_argument("--workers", type=int, default=4, help="DataLoader worker processes (they tokenise)")
    parser.add_argument("--batch-size", type=int, default=128, help="sequences per step")
    parser.add_argument("--seq-len", type=int, default=256, help="tokens per sequence")
    parser.add_argument("--vocab", type=int, default=8000, help="vocabulary size: whole words and word pieces")
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=0, help="steps to train; 0: until killed")
    parser.add_argument("--log-interval", type=int, default=10, help="a progress line every this many steps")
    return parser.parse_args()


def read_lines(data: str) -> list[str]:
    """The corpus's non-empty lines, raw: a file, or every *.txt file under a folder in name order."""
    path = Path(data)
    files = sorted(path.rglob("*.txt")) if path.is_dir() else [path]
    lines = [line for f in files for line in f.read_text(encoding="utf-8", errors="replace").splitlines()
             if line.strip()]
    if not lines:
        raise SystemExit(f"text_transformer: no text under {data}")
    return lines


def split_words(line: str) -> list[str]:
    """Words, numbers and punctuation of a raw line, cleaned character by character as BERT's
    reference tokenizer does in Python: lower case, accents stripped, control characters dropped,
    other white space made a space."""
    kept = []
    for ch in unicodedata.normalize("NFD", line.lower()):
        category = unicodedata.category(ch)
        if category == "Mn" or (category[0] == "C" and ch not in "\t\n\r"):
            continue
        kept.append(" " if category == "Zs" or ch in "\t\n\r" else ch)
    return WORD.findall("".join(kept))


class Tokenizer:
    """Words to ids: a vocabulary of the corpus's most frequent words, and for the rest the most
    frequent word pieces (as WordPiece, a piece after a word's first one carries '##'); a word is
    split greedily into its longest known pieces, <unk> when it cannot be."""

    def __init__(self, lines: list[str], size: int):
        counts = collections.Counter(w for line in lines for w in split_words(line))
        n_words = max(1, (size - len(SPECIALS)) * 3 // 4)
        words = [w for w, _ in counts.most_common(n_words)]
        known = set(words)
        pieces: collections.Counter = collections.Counter()
        for word, n in counts.items():
            if word not in known:
                for start in range(len(word)):
                    for end in range(start + 1, min(len(word), start + 4) + 1):
                        pieces[(CONTINUATION if start else "") + word[start:end]] += n
        chars = {c for w in counts for c in w}
        singles = sorted(chars) + [CONTINUATION + c for c in sorted(chars)]  # any word can be spelt
        n_pieces = max(0, size - len(SPECIALS) - len(words) - len(singles))
        extra = [p for p, _ in pieces.most_common() if p not in known and p not in singles][:n_pieces]
        self.itos = list(SPECIALS) + words + singles + extra
        self.stoi = {s: i for i, s in enumerate(self.itos)}
        self.unk, self.eos = self.stoi["<unk>"], self.stoi["<eos>"]

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, line: str) -> list[int]:
        ids: list[int] = []
        for word in split_words(line):
            i = self.stoi.get(word)
            if i is None:
                ids.extend(self.pieces(word))
            else:
                ids.append(i)
        ids.append(self.eos)
        return ids

    def pieces(self, word: str) -> list[int]:
        """Greedy longest-match-first split of a word into known pieces."""
        out, start = [], 0
        while start < len(word):
            prefix = CONTINUATION if start else ""
            for end in range(len(word), start, -1):
                i = self.stoi.get(prefix + word[start:end])
                if i is not None:
                    out.append(i)
                    start = end
                    break
            else:
                return [self.unk]
        return out


class TextWindows(torch.utils.data.Dataset):
    """Sample i: the tokens of lines i, i+1, ... (wrapping round), tokenised now, cut to
    seq_len + 1 (input and next-token target)."""

    def __init__(self, lines: list[str], tokenizer: Tokenizer, seq_len: int):
        self.lines, self.tokenizer, self.seq_len = lines, tokenizer, seq_len

    def __len__(self) -> int:
        return len(self.lines)

    def __getitem__(self, index: int) -> torch.Tensor:
        ids: list[int] = []
        for j in itertools.count(index):
            ids.extend(self.tokenizer.encode(self.lines[j % len(self.lines)]))
            if len(ids) > self.seq_len:
                return torch.tensor(ids[: self.seq_len + 1])
        raise AssertionError("unreachable")


class LanguageModel(nn.Module):
    """Token and position embeddings, a pre-norm TransformerEncoder under a causal mask, and a
    projection back onto the vocabulary."""

    def __init__(self, vocab: int, d_model: int, layers: int, heads: int, seq_len: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.position = nn.Parameter(torch.zeros(1, seq_len, d_model))
        layer = nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout=0.1, batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq_len), persistent=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        n = tokens.size(1)
        x = self.embed(tokens) * math.sqrt(self.embed.embedding_dim) + self.position[:, :n]
        x = self.encoder(x, mask=self.mask[:n, :n], is_causal=True)
        return self.head(self.norm(x))


def main() -> None:
    args = parse_args()
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    torch.backends.cuda.matmul.allow_tf32 = True
    lines = read_lines(args.data)
    tokenizer = Tokenizer(lines, args.vocab)
    print(f"{len(lines):,} lines, vocabulary of {len(tokenizer):,}", flush=True)
    loader = torch.utils.data.DataLoader(TextWindows(lines, tokenizer, args.seq_len), batch_size=args.batch_size,
                                         shuffle=True, num_workers=args.workers, pin_memory=cuda, drop_last=True)
    model = LanguageModel(len(tokenizer), args.d_model, args.layers, args.heads, args.seq_len).to(device)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    criterion = nn.CrossEntropyLoss()

    steps = range(1, args.steps + 1) if args.steps > 0 else itertools.count(1)
    batches = (batch for _ in itertools.count() for batch in loader)  # epoch after epoch
    since, tokens = time.monotonic(), 0
    for step, batch in zip(steps, batches):
        batch = batch.to(device, non_blocking=True)
        inputs, targets = batch[:, :-1], batch[:, 1:]
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=cuda):
            logits = model(inputs)
            loss = criterion(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        tokens += targets.numel()
        if step % args.log_interval == 0:
            value = loss.item()  # waits for the GPU: the rate counts steps that have run
            now = time.monotonic()
            print(f"step {step} | {tokens / max(now - since, 1e-9):,.0f} tokens/s | loss {value:.2f}", flush=True)
            since, tokens = now, 0


if __name__ == "__main__":
    main()
