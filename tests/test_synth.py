"""Synthetic ImageNet-like JPEGs and the PTB-like corpus: determinism, statistics, texture, layout."""

from __future__ import annotations

import io
import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from workloads import synth


# ---------------------------------------------------------------- JPEGs
def test_synth_jpeg_is_deterministic_per_seed_and_index():
    a = synth.synth_jpeg(3, 17)
    assert a == synth.synth_jpeg(3, 17)
    assert a != synth.synth_jpeg(3, 18)
    assert a != synth.synth_jpeg(4, 17)
    with Image.open(io.BytesIO(a)) as img:
        assert img.format == "JPEG" and img.mode == "RGB"


@pytest.fixture(scope="module")
def sample_rows():
    """(index, bytes, width, height) of 400 images of seed 0."""
    rows = []
    for i in range(400):
        data, w, h = synth.synth_image(0, i)
        rows.append((i, len(data), w, h))
    return rows


def test_sizes_and_dimensions_are_imagenet_like(sample_rows):
    rows = sample_rows
    stats = synth.image_stats(rows)
    assert 80 <= stats["mean_kb"] <= 140, stats
    assert 450 <= stats["median_width"] <= 520 and 330 <= stats["median_height"] <= 400, stats
    # A spread of sizes and shapes, not one fixed frame: portrait and square images occur too.
    shapes = Counter((w > h) - (w < h) for _, _, w, h in rows)
    assert shapes[1] > shapes[-1] > 0 and shapes[0] > 0
    kb = np.array([r[1] for r in rows]) / 1000
    assert np.percentile(kb, 90) > 1.5 * np.percentile(kb, 10)
    assert len({(w, h) for _, _, w, h in rows}) > 30


def _luma(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as img:
        return np.asarray(img.convert("L"), dtype=np.float64)


def _spectrum_slope(y: np.ndarray) -> float:
    """Slope of log radial power against log frequency (about -2 for photographs, 0 for white noise)."""
    size = min(y.shape) // 2 * 2
    y = y[:size, :size] - y[:size, :size].mean()
    power = np.abs(np.fft.fftshift(np.fft.fft2(y))) ** 2
    c = size // 2
    yy, xx = np.indices(power.shape)
    r = np.hypot(yy - c, xx - c).astype(int)
    radial = np.bincount(r.ravel(), power.ravel()) / np.maximum(np.bincount(r.ravel()), 1)
    f = np.arange(4, c // 2)
    return float(np.polyfit(np.log(f), np.log(radial[f]), 1)[0])


def test_texture_is_photograph_like_not_flat_or_white_noise():
    slopes, correlations, spreads = [], [], []
    for i in range(12):
        y = _luma(synth.synth_jpeg(1, i))
        slopes.append(_spectrum_slope(y))
        correlations.append(np.corrcoef(y[:, :-1].ravel(), y[:, 1:].ravel())[0, 1])
        spreads.append(y.std())
    assert -3.2 < np.median(slopes) < -1.3, slopes  # white noise ~0, a flat image has no spectrum
    assert np.median(correlations) > 0.7, correlations  # neighbours alike (white noise: ~0)
    assert np.median(spreads) > 20, spreads  # not flat colour
    # The reference: white noise, encoded the same way, fails the same checks.
    noise = np.random.default_rng(0).integers(0, 256, (375, 500, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(noise).save(buf, "JPEG", quality=90)
    assert _spectrum_slope(_luma(buf.getvalue())) > -0.5


def test_generate_imagenet_layout_manifest_and_determinism(tmp_path):
    calls = []
    manifest = synth.generate_imagenet(tmp_path, 60, 3, seed=5, val_fraction=0.1, processes=2,
                                       progress=lambda done, total: calls.append((done, total)))
    assert manifest["counts"] == {"train": 54, "val": 6}
    assert manifest["n_classes"] == 3 and manifest["seed"] == 5
    assert json.loads((tmp_path / "manifest.json").read_text()) == manifest
    assert calls[-1] == (60, 60)
    files = sorted(tmp_path.glob("*/n*/*.JPEG"))
    assert len(files) == 60
    assert {p.parent.name for p in files} == {"n00000000", "n00000001", "n00000002"}
    assert manifest["total_bytes"] == sum(p.stat().st_size for p in files)
    # Each file is the pure function of (seed, index) its name says, whichever worker wrote it.
    for path in files[:5]:
        index = int(path.stem.rsplit("_", 1)[1])
        assert path.read_bytes() == synth.synth_jpeg(5, index)
        assert path.parent.name == synth.class_name(index % 3)
    again = synth.plan_imagenet(60, 3, 5, 0.1)
    val = {i for i, split, _ in again if split == "val"}
    assert {int(p.stem.rsplit("_", 1)[1]) for p in files if p.parts[-3] == "val"} == val


def test_plan_refuses_bad_parameters():
    with pytest.raises(ValueError):
        synth.plan_imagenet(0, 3, 0, 0.1)
    with pytest.raises(ValueError):
        synth.plan_imagenet(10, 3, 0, 1.0)


# ---------------------------------------------------------------- PTB-like corpus
@pytest.fixture(scope="module")
def ptb_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ptb")
    synth.generate_ptb(out, seed=0)
    return out


def test_ptb_files_format_and_sizes(ptb_dir):
    manifest = json.loads((ptb_dir / "manifest.json").read_text())
    for name, target in zip(synth.PTB_FILES, (929_000, 73_000, 82_000)):
        text = (ptb_dir / name).read_text()
        lines = text.split("\n")[:-1]
        assert text.endswith("\n")
        assert all(line.startswith(" ") and line.endswith(" ") and "  " not in line for line in lines[:2000])
        tokens = sum(len(line.split()) + 1 for line in lines)
        assert abs(tokens - target) / target < 0.01
        split = name.split(".")[1]
        assert manifest["counts"][split]["tokens"] == tokens
    words = (ptb_dir / "ptb.train.txt").read_text().split()
    vocab = set(words)
    assert len(vocab) + 1 == synth.PTB_VOCAB  # + end of sentence, as PTB's 10k
    assert "<unk>" in vocab and "N" in vocab
    assert all(w == w.lower() for w in vocab if w not in ("N",))
    for split in ("valid", "test"):
        assert set((ptb_dir / f"ptb.{split}.txt").read_text().split()) <= vocab


def test_ptb_statistics_are_ptb_like(ptb_dir):
    lines = (ptb_dir / "ptb.train.txt").read_text().splitlines()
    lengths = np.array([len(line.split()) for line in lines])
    assert 19 <= lengths.mean() <= 23 and 8 <= lengths.std() <= 14
    counts = Counter(w for line in lines for w in line.split())
    freq = np.array(sorted(counts.values(), reverse=True), dtype=float)
    ranks = np.arange(1, len(freq) + 1)
    slope = np.polyfit(np.log(ranks[9:1000]), np.log(freq[9:1000]), 1)[0]
    assert -1.3 < slope < -0.7, slope  # Zipf
    top = {w for w, _ in counts.most_common(6)}
    assert {"the", "<unk>", "N"} <= top


def test_ptb_next_word_is_predictable(ptb_dir):
    """A smoothed bigram model fitted on train predicts valid much better than unigram frequencies:
    the corpus has sequential structure for a language model to learn."""

    def ids(name, index):
        out = []
        for line in (ptb_dir / name).read_text().splitlines():
            out += [index.setdefault(w, len(index)) for w in line.split()] + [index.setdefault("<eos>", len(index))]
        return np.array(out)

    index: dict[str, int] = {}
    train, valid = ids("ptb.train.txt", index), ids("ptb.valid.txt", index)
    v = len(index)
    unigram = np.bincount(train, minlength=v) + 1.0
    unigram /= unigram.sum()
    pairs = Counter(zip(train[:-1].tolist(), train[1:].tolist()))
    prev_counts = np.bincount(train[:-1], minlength=v)
    lam = 0.7
    uni_nll = -np.mean(np.log(unigram[valid[1:]]))
    bi = [
        lam * pairs.get((a, b), 0) / max(prev_counts[a], 1) + (1 - lam) * unigram[b]
        for a, b in zip(valid[:-1].tolist(), valid[1:].tolist())
    ]
    bi_nll = -np.mean(np.log(bi))
    assert bi_nll < uni_nll - 0.5, (uni_nll, bi_nll)
    assert math.exp(bi_nll) < 600


def test_ptb_is_deterministic(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    synth.generate_ptb(a, seed=2, train_tokens=5000, valid_tokens=500, test_tokens=500)
    synth.generate_ptb(b, seed=2, train_tokens=5000, valid_tokens=500, test_tokens=500)
    for name in synth.PTB_FILES:
        assert (a / name).read_bytes() == (b / name).read_bytes()
    synth.generate_ptb(b, seed=3, train_tokens=5000, valid_tokens=500, test_tokens=500)
    assert (a / "ptb.train.txt").read_bytes() != (b / "ptb.train.txt").read_bytes()
