"""Synthetic datasets that behave like the real ones where a benchmark can tell.

- ImageNet-like JPEGs: sizes drawn around ImageNet's (median 500x375, a spread of sizes and aspect
  ratios), quality 90, about 110 KB on average, with the texture of photographs: 1/f^beta spectrum
  luminance with correlated, smoother colour, flat-ish regions and sharp object edges. Decode cost
  and file size, which are what a loader feels, follow from that.
- A PTB-like corpus: a 10k-word vocabulary with `<unk>` and `N`, Zipfian frequencies, PTB-like
  sentence lengths and PTB's file format, from a hidden-state Markov source so a language model has
  something to learn.

Everything is a pure function of the seed (and the image index). Standard library, numpy and PIL
only: it also runs inside the MXNet environment.
"""

from __future__ import annotations

import io
import json
import math
import multiprocessing
import os
import signal
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
from PIL import Image, ImageDraw

GENERATOR_VERSION = 1
JPEG_QUALITY = 90
KB = 1000  # sizes in the manifest are in kB (10^3 bytes), as dataset sizes are usually quoted

# Texture bank: 1/f^beta fields computed once per seed and process; each image takes random crops of
# two fields (and a smooth colour field), which costs a slice instead of an FFT per image.
_BANK_SIZE = 1024
_BETAS = (0.85, 0.95, 1.05, 1.15)  # amplitude exponents; photographs sit near 1
_CHROMA_BETA = 1.6  # colour varies more smoothly than brightness
_MAX_SIDE = 1000  # long side cap; must stay <= _BANK_SIZE
_DETAIL_MEDIAN = 56.0  # texture strength; sets the mean file size (about 110 kB at quality 90)
_banks: dict[int, tuple[list[np.ndarray], np.ndarray]] = {}

# ImageNet's photos mostly come from Flickr at 500 px on the long side, 4:3 landscape being the most
# common shape; the rest spread around that.
_ASPECTS = (4 / 3, 3 / 2, 1.0, 5 / 4, 16 / 9, 1.2, 1.6)
_ASPECT_P = (0.55, 0.15, 0.08, 0.06, 0.06, 0.05, 0.05)


def _spectral_fields(rng: np.random.Generator, n: int, beta: float, size: int) -> np.ndarray:
    """n periodic size x size fields with amplitude spectrum 1/f^beta, each of unit variance."""
    fy = np.fft.fftfreq(size)[:, None]
    fx = np.fft.rfftfreq(size)[None, :]
    f = np.sqrt(fy * fy + fx * fx)
    f[0, 0] = 1.0
    amp = (f ** (-beta)).astype(np.float32)
    amp[0, 0] = 0.0  # zero mean
    shape = (n, size, size // 2 + 1)
    spec = np.empty(shape, np.complex64)
    spec.real = rng.standard_normal(shape, dtype=np.float32)
    spec.imag = rng.standard_normal(shape, dtype=np.float32)
    spec *= amp
    out = np.fft.irfft2(spec, s=(size, size), axes=(1, 2)).astype(np.float32)
    out /= out.std(axis=(1, 2), keepdims=True)
    return out


def _bank(seed: int) -> tuple[list[np.ndarray], np.ndarray]:
    bank = _banks.get(seed)
    if bank is None:
        rng = np.random.default_rng([seed, 0x5EED, GENERATOR_VERSION])
        lum = [_spectral_fields(rng, 2, beta, _BANK_SIZE) for beta in _BETAS]
        chroma = _spectral_fields(rng, 3, _CHROMA_BETA, _BANK_SIZE)
        # Opponent colour axes (brightness, red-green, blue-yellow) to RGB offsets: correlated
        # channels, as in photographs, rather than three independent noises.
        mix = np.array([[22, 22, 22], [12, -6, -6], [0, 10, -10]], np.float32)
        colour = np.tensordot(chroma, mix, axes=([0], [0])).astype(np.float32)
        bank = (lum, colour)
        _banks.clear()  # one seed at a time keeps a worker's memory at about 60 MB
        _banks[seed] = bank
    return bank


def _draw_size(rng: np.random.Generator) -> tuple[int, int]:
    if rng.random() < 0.55:
        long_side = 500
    else:
        long_side = int(np.clip(rng.lognormal(math.log(480), 0.3), 200, _MAX_SIDE))
    aspect = _ASPECTS[int(rng.choice(len(_ASPECTS), p=_ASPECT_P))]
    short_side = max(64, int(round(long_side / aspect)))
    if rng.random() < 0.78:  # landscape
        return long_side, short_side
    return short_side, long_side


def _crop(rng: np.random.Generator, field: np.ndarray, w: int, h: int) -> np.ndarray:
    y = int(rng.integers(0, field.shape[0] - h + 1))
    x = int(rng.integers(0, field.shape[1] - w + 1))
    return field[y : y + h, x : x + w]


def _render(rng: np.random.Generator, seed: int, w: int, h: int) -> np.ndarray:
    lum, colour = _bank(seed)
    detail = rng.lognormal(math.log(_DETAIL_MEDIAN), 0.35)
    pair = lum[int(rng.integers(len(lum)))]
    a = float(rng.uniform(0.3, 0.95))
    texture = _crop(rng, pair[0], w, h) * np.float32(a) + _crop(rng, pair[1], w, h) * np.float32(math.sqrt(1 - a * a))
    tint = _crop(rng, colour, w, h)

    # Objects: regions of their own colour and texture strength, with sharp edges.
    base = Image.new("RGB", (w, h), tuple(int(v) for v in rng.integers(30, 200, 3)))
    strength = Image.new("L", (w, h), int(rng.integers(10, 50)))
    draw_base, draw_strength = ImageDraw.Draw(base), ImageDraw.Draw(strength)
    for _ in range(int(rng.integers(3, 9))):
        grey = float(rng.integers(20, 230))
        fill = tuple(int(v) for v in np.clip(grey + rng.normal(0, 45, 3), 0, 255))
        contrast = int(rng.integers(5, 60))
        cx, cy = rng.uniform(0, w), rng.uniform(0, h)
        rx, ry = rng.uniform(0.05, 0.5) * w, rng.uniform(0.05, 0.5) * h
        if rng.random() < 0.5:
            box = [cx - rx, cy - ry, cx + rx, cy + ry]
            draw_base.ellipse(box, fill=fill)
            draw_strength.ellipse(box, fill=contrast)
        else:
            angles = np.sort(rng.uniform(0, 2 * np.pi, int(rng.integers(3, 8))))
            points = [(float(cx + rx * np.cos(t)), float(cy + ry * np.sin(t))) for t in angles]
            draw_base.polygon(points, fill=fill)
            draw_strength.polygon(points, fill=contrast)

    texture = texture * np.asarray(strength, dtype=np.float32)
    texture *= np.float32(detail / 30.0)
    # Illumination falls off across the frame, as light does.
    texture += np.linspace(-1.0, 1.0, h, dtype=np.float32)[:, None] * np.float32(rng.uniform(-20, 20))
    img = np.asarray(base, dtype=np.float32) + tint
    img += texture[..., None]
    np.clip(img, 0, 255, out=img)
    return img.astype(np.uint8)


def synth_image(seed: int, index: int) -> tuple[bytes, int, int]:
    """(JPEG bytes, width, height) of image `index` of the synthetic set `seed`."""
    rng = np.random.default_rng([int(seed), int(index), GENERATOR_VERSION])
    w, h = _draw_size(rng)
    pixels = _render(rng, int(seed), w, h)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, "JPEG", quality=JPEG_QUALITY)
    return buf.getvalue(), w, h


def synth_jpeg(seed: int, index: int) -> bytes:
    """The JPEG bytes of image `index` of the synthetic ImageNet-like set `seed`."""
    return synth_image(seed, index)[0]


# ---------------------------------------------------------------- ImageNet-like folder
def class_name(label: int) -> str:
    """WordNet-style folder name of a synthetic class (sorted order = label order)."""
    return f"n{label:08d}"


def plan_imagenet(n_images: int, n_classes: int, seed: int, val_fraction: float) -> list[tuple[int, str, int]]:
    """(index, split, label) of every image: classes balanced, a seeded val split."""
    if n_images < 1 or n_classes < 1:
        raise ValueError("n_images and n_classes must be >= 1")
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError("val_fraction must be in [0, 1)")
    n_val = int(round(n_images * val_fraction))
    val = set(np.random.default_rng([int(seed), 0x7A1]).permutation(n_images)[:n_val].tolist())
    return [(i, "val" if i in val else "train", i % n_classes) for i in range(n_images)]


def image_relpath(index: int, split: str, label: int) -> str:
    name = class_name(label)
    return f"{split}/{name}/{name}_{index}.JPEG"


def _write_chunk(args: tuple[str, int, list[tuple[int, str, int]]]) -> list[tuple[int, int, int, int]]:
    out_dir, seed, chunk = args
    rows = []
    for index, split, label in chunk:
        data, w, h = synth_image(seed, index)
        (Path(out_dir) / image_relpath(index, split, label)).write_bytes(data)
        rows.append((index, len(data), w, h))
    return rows


def _ignore_sigint() -> None:
    # Ctrl-C reaches the whole process group: the parent handles it (and terminates the pool), so
    # workers stay quiet instead of each printing a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def image_stats(rows: Iterable[tuple[int, int, int, int]]) -> dict:
    """Totals of (index, bytes, width, height) rows: total bytes, mean kB, median dimensions."""
    rows = list(rows)
    sizes = np.array([r[1] for r in rows], dtype=np.float64)
    return {
        "total_bytes": int(sizes.sum()),
        "mean_kb": float(sizes.mean() / KB) if len(rows) else 0.0,
        "median_width": float(np.median([r[2] for r in rows])) if rows else 0.0,
        "median_height": float(np.median([r[3] for r in rows])) if rows else 0.0,
    }


def generate_imagenet(
    out_dir: str | os.PathLike,
    n_images: int,
    n_classes: int,
    seed: int = 0,
    val_fraction: float = 0.1,
    processes: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict:
    """Write `out_dir/{train,val}/nXXXXXXXX/*.JPEG` and `out_dir/manifest.json`; return the manifest.

    `processes` workers generate in parallel (default: the CPUs this process may use); `progress` is
    called as progress(done, total) while images are written.
    """
    out = Path(out_dir)
    plan = plan_imagenet(n_images, n_classes, seed, val_fraction)
    for split in ("train", "val"):
        for label in sorted({lab for _, s, lab in plan if s == split}):
            (out / split / class_name(label)).mkdir(parents=True, exist_ok=True)
    processes = max(1, int(processes or len(os.sched_getaffinity(0))))
    chunk = max(1, min(64, n_images // (processes * 8) or 1))
    jobs = [(str(out), int(seed), plan[i : i + chunk]) for i in range(0, n_images, chunk)]
    rows: list[tuple[int, int, int, int]] = []
    if progress:
        progress(0, n_images)
    if processes == 1:
        results = map(_write_chunk, jobs)
        for part in results:
            rows.extend(part)
            if progress:
                progress(len(rows), n_images)
    else:
        _bank(int(seed))  # built once here; forked workers share it instead of each building one
        # fork: children run only this module's pure functions, so threads of the caller (a progress
        # bar) do not matter, and unlike spawn no caller's main module is re-imported.
        with multiprocessing.get_context("fork").Pool(processes, initializer=_ignore_sigint) as pool:
            for part in pool.imap_unordered(_write_chunk, jobs):
                rows.extend(part)
                if progress:
                    progress(len(rows), n_images)
    rows.sort()
    split_of = {i: s for i, s, _ in plan}
    manifest = {
        "generator": "synthetic-imagenet",
        "generator_version": GENERATOR_VERSION,
        "seed": int(seed),
        "n_images": int(n_images),
        "n_classes": int(n_classes),
        "val_fraction": float(val_fraction),
        "jpeg_quality": JPEG_QUALITY,
        "counts": {s: sum(1 for r in rows if split_of[r[0]] == s) for s in ("train", "val")},
        **image_stats(rows),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


# ---------------------------------------------------------------- PTB-like corpus
PTB_FILES = ("ptb.train.txt", "ptb.valid.txt", "ptb.test.txt")
PTB_VOCAB = 10_000  # with the end-of-sentence token readers add, as for the real PTB
_PTB_STATES = 64
_PTB_HEAD_WORDS = 50  # the most frequent words, shared by all states
# How sharply a state picks its successor and its favourite frequent words. Tuned so that a count
# bigram model beats unigram frequencies by about 1 nat per word, as on the real PTB.
_PTB_TRANSITION_CONCENTRATION = 0.3
_PTB_HEAD_MODULATION = 2.0
_PTB_MIX = 4  # transitions are a mixture of this many permutations: each state has a few likely successors
_PTB_LEN_MEAN, _PTB_LEN_SD = 21.0, 10.5  # words per sentence, without the end token

# PTB's most frequent words in order (Mikolov's preprocessing: lowercase, numbers -> N, rare -> <unk>).
_PTB_HEAD = (
    "the <unk> N of to a in and 's that for $ is it said on by at as from million with mr. was be are "
    "its he but has an n't will have new or company they this year which would about says more were "
    "market up one than stock who also had some billion not been share i other could corp. his "
    "years last first two shares after inc. sales all because there can if into do trading only prices "
    "out president over when most business u.s. may price we such government so what no her three"
).split()
_ONSETS = "b c d f g h j k l m n p r s t v w z br ch cr dr fl gr pl pr sh st th tr".split()
_VOWELS = "a e i o u a e i o u ai ea ee ou".split()
_CODAS = ["", "", "", "n", "r", "s", "t", "l", "m", "nd", "st", "ng"]


def ptb_vocabulary(seed: int = 0) -> list[str]:
    """The corpus's 9,999 distinct words (10,000 with end-of-sentence), most frequent first."""
    rng = np.random.default_rng([int(seed), 0x97B])
    words = list(dict.fromkeys(_PTB_HEAD))
    seen = set(words)
    while len(words) < PTB_VOCAB - 1:
        syllables = int(rng.choice([1, 2, 3], p=[0.3, 0.5, 0.2]))
        word = "".join(
            _ONSETS[rng.integers(len(_ONSETS))] + _VOWELS[rng.integers(len(_VOWELS))] + _CODAS[rng.integers(len(_CODAS))]
            for _ in range(syllables)
        )
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


class _PtbSource:
    """A hidden Markov source. States follow a sparse transition matrix, a mixture of a few
    permutations (doubly stochastic, so every state is equally common). At each position the state
    emits either one of the 50 most frequent (function) words, with Zipf weights modulated by the
    state, or one of its own rarer words (each rarer word belongs to one state, round-robin by
    rank), with Zipf weights. Overall frequencies stay Zipfian and the next word depends on the
    previous ones, so a language model's loss falls as it learns the transitions."""

    def __init__(self, seed: int):
        rng = np.random.default_rng([int(seed), 0x50C])
        self.words = ptb_vocabulary(seed)
        self.index = {w: i for i, w in enumerate(self.words)}
        ranks = np.arange(len(self.words))
        zipf = 1.0 / (ranks + 2.7)
        head = _PTB_HEAD_WORDS
        self.head_mass = float(zipf[:head].sum() / zipf.sum())
        self.state_of = np.where(ranks < head, -1, (ranks - head) % _PTB_STATES)
        self.perms = np.stack([rng.permutation(_PTB_STATES) for _ in range(_PTB_MIX)])
        self.weights = rng.dirichlet(np.full(_PTB_MIX, _PTB_TRANSITION_CONCENTRATION))
        modulation = rng.lognormal(0.0, _PTB_HEAD_MODULATION, size=(_PTB_STATES, head))
        modulation /= modulation.mean(axis=0)  # every head word keeps its overall frequency rank
        self.head_cdfs = []
        for s in range(_PTB_STATES):
            p = zipf[:head] * modulation[s]
            self.head_cdfs.append(np.cumsum(p / p.sum()))
        self.members = [np.flatnonzero(self.state_of == s) for s in range(_PTB_STATES)]
        self.cdfs = []
        for members in self.members:
            p = zipf[members]
            self.cdfs.append(np.cumsum(p / p.sum()))

    def cover_vocabulary(self, rng: np.random.Generator, sentences: list[list[str]]) -> None:
        """Make every vocabulary word occur in `sentences` (in place), as every word of PTB's
        vocabulary occurs in its train split: a missing word replaces one occurrence of a word of
        its own state that occurs more than once."""
        counts: dict[str, int] = {}
        for sentence in sentences:
            for w in sentence:
                counts[w] = counts.get(w, 0) + 1
        missing = [i for i, w in enumerate(self.words) if w not in counts]
        if not missing:
            return
        by_state: dict[int, list[tuple[int, int]]] = {}
        for si, sentence in enumerate(sentences):
            for wi, w in enumerate(sentence):
                state = int(self.state_of[self.index[w]])
                if state >= 0:  # rarer words only; the frequent ones are never missing
                    by_state.setdefault(state, []).append((si, wi))
        order = {state: iter(rng.permutation(len(spots)).tolist()) for state, spots in by_state.items()}
        for word_id in missing:
            state = int(self.state_of[word_id])
            spots = by_state.get(state, [])
            for pick in order.get(state, iter(())):
                si, wi = spots[pick]
                old = sentences[si][wi]
                if counts[old] > 1:  # never remove a word's last occurrence
                    counts[old] -= 1
                    sentences[si][wi] = self.words[word_id]
                    counts[self.words[word_id]] = 1
                    break
            # A corpus too small to hold every word keeps the ones it has.

    def sentences(self, rng: np.random.Generator, n_tokens: int) -> list[list[str]]:
        """Sentences until their tokens, counting one end-of-sentence token each, reach n_tokens."""
        k = _PTB_LEN_MEAN**2 / _PTB_LEN_SD**2
        lengths: list[int] = []
        total = 0
        while total < n_tokens:
            draw = np.maximum(1, np.rint(rng.gamma(k, _PTB_LEN_MEAN / k, size=4096))).astype(int)
            for n in draw.tolist():
                lengths.append(n)
                total += n + 1
                if total >= n_tokens:
                    break
        n_words = sum(lengths)
        # Hidden state sequence (sequential; a plain loop over lists is the fast way in Python).
        choice = rng.choice(_PTB_MIX, size=n_words, p=self.weights).tolist()
        starts = rng.integers(0, _PTB_STATES, size=len(lengths)).tolist()
        perms = self.perms.tolist()
        sequence: list[int] = []
        append = sequence.append
        pos = 0
        for sentence, n in enumerate(lengths):
            s = starts[sentence]
            for _ in range(n):
                append(s)
                s = perms[choice[pos]][s]
                pos += 1
        states = np.array(sequence, dtype=np.int64)
        # Emissions, vectorised per state.
        word_ids = np.empty(n_words, dtype=np.int64)
        u = rng.random(n_words)
        is_head = rng.random(n_words) < self.head_mass
        for s in range(_PTB_STATES):
            in_state = states == s
            at = np.flatnonzero(in_state & is_head)
            word_ids[at] = np.minimum(np.searchsorted(self.head_cdfs[s], u[at]), _PTB_HEAD_WORDS - 1)
            at = np.flatnonzero(in_state & ~is_head)
            idx = np.minimum(np.searchsorted(self.cdfs[s], u[at]), len(self.members[s]) - 1)
            word_ids[at] = self.members[s][idx]
        words = np.array(self.words, dtype=object)[word_ids].tolist()
        out, pos = [], 0
        for n in lengths:
            out.append(words[pos : pos + n])
            pos += n
        return out


def ptb_line(words: list[str]) -> str:
    """One sentence in PTB's layout: a leading space, words separated by spaces, a trailing space."""
    return " " + " ".join(words) + " \n"


def generate_ptb(
    out_dir: str | os.PathLike,
    seed: int = 0,
    train_tokens: int = 929_000,
    valid_tokens: int = 73_000,
    test_tokens: int = 82_000,
) -> dict:
    """Write ptb.train.txt, ptb.valid.txt, ptb.test.txt (and manifest.json) under out_dir.

    Token counts include one end-of-sentence token per line, as PTB's 929k/73k/82k do. Words of
    valid/test that never occur in train become `<unk>`, as in PTB, so a vocabulary built from
    train covers every split.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    source = _PtbSource(seed)
    counts: dict[str, dict[str, int]] = {}
    train_vocab: set[str] = set()
    for split, n_tokens, tag in (("train", train_tokens, 1), ("valid", valid_tokens, 2), ("test", test_tokens, 3)):
        if n_tokens < 1:
            raise ValueError(f"{split}_tokens must be >= 1")
        sentences = source.sentences(np.random.default_rng([int(seed), tag]), int(n_tokens))
        if split == "train":
            source.cover_vocabulary(np.random.default_rng([int(seed), 4]), sentences)
            train_vocab = {w for s in sentences for w in s}
        else:
            sentences = [[w if w in train_vocab else "<unk>" for w in s] for s in sentences]
        path = out / f"ptb.{split}.txt"
        with open(path, "w", encoding="utf-8") as fh:
            fh.writelines(ptb_line(s) for s in sentences)
        counts[split] = {
            "sentences": len(sentences),
            "tokens": sum(len(s) + 1 for s in sentences),
            "bytes": path.stat().st_size,
        }
    manifest = {
        "generator": "synthetic-ptb",
        "generator_version": GENERATOR_VERSION,
        "seed": int(seed),
        "requested_tokens": {"train": train_tokens, "valid": valid_tokens, "test": test_tokens},
        "counts": counts,
        "vocabulary": len(train_vocab) + 1,  # + end of sentence
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest
