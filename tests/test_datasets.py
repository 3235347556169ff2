"""sizer.datasets and `sizer data`: generate once, pack, reuse, refuse bad input, leave no scratch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sizer import datasets
from sizer.errors import SizerError
from workloads import formats, synth


def _scratch_left(path: Path) -> list[Path]:
    return [p for p in path.rglob(f"{datasets.SCRATCH_PREFIX}*")]


@pytest.fixture(scope="module")
def small_set(tmp_path_factory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("data") / "imagenet"
    info = datasets.ensure_imagenet(root, images=48, classes=4, seed=2, formats=("files", "lmdb", "rec", "tar"), progress=False)
    return root, info


def test_ensure_imagenet_generates_and_packs(small_set):
    root, info = small_set
    assert info["generated_now"] and info["synthetic"]
    assert (info["n_images"], info["n_train"], info["n_val"], info["n_classes"]) == (48, 43, 5, 4)
    assert 60 < info["mean_kb"] < 200 and info["median_width"] > 0
    assert info["total_bytes"] == sum(p.stat().st_size for p in root.glob("*/n*/*.JPEG"))
    for fmt in ("lmdb", "rec", "tar"):
        splits = info["formats"][fmt]["splits"]
        assert splits["train"]["records"] == 43 and splits["val"]["records"] == 5
        assert len(formats.open_image_dataset(root, fmt, "val")) == 5
    assert not _scratch_left(root)


def test_ensure_imagenet_reuses_a_matching_set(small_set):
    root, _ = small_set
    marker = root / "train" / synth.class_name(0)
    before = {p: p.stat().st_mtime_ns for p in marker.iterdir()}
    rec_before = (root / "packed" / "rec" / "train.rec").stat().st_mtime_ns
    info = datasets.ensure_imagenet(root, images=48, classes=4, seed=2, formats=("rec",), progress=False)
    assert not info["generated_now"]
    assert {p: p.stat().st_mtime_ns for p in marker.iterdir()} == before
    assert (root / "packed" / "rec" / "train.rec").stat().st_mtime_ns == rec_before
    packed = datasets.ensure_packed(root, "rec", progress=False)
    assert not packed["packed_now"]


def test_a_different_request_regenerates_and_drops_stale_packs(tmp_path):
    root = tmp_path / "set"
    datasets.ensure_imagenet(root, images=12, classes=2, seed=0, formats=("tar",), progress=False)
    first = sorted(p.read_bytes() for p in root.glob("train/*/*.JPEG"))
    info = datasets.ensure_imagenet(root, images=14, classes=2, seed=1, progress=False)
    assert info["generated_now"] and info["n_images"] == 14 and info["seed"] == 1
    assert sorted(p.read_bytes() for p in root.glob("train/*/*.JPEG")) != first
    assert not (root / "packed" / "tar").exists()  # packed from the old set: gone
    assert json.loads((root / "manifest.json").read_text())["seed"] == 1


def test_interrupted_generation_leaves_nothing(tmp_path, monkeypatch):
    root = tmp_path / "set"
    real = synth.generate_imagenet

    def interrupted(out_dir, n_images, *args, **kwargs):
        real(out_dir, 5, 2, 0, 0.0, 1, None)  # some files written, then Ctrl-C
        raise KeyboardInterrupt

    monkeypatch.setattr(datasets.synth, "generate_imagenet", interrupted)
    with pytest.raises(KeyboardInterrupt):
        datasets.ensure_imagenet(root, images=20, classes=2, progress=False)
    assert not _scratch_left(tmp_path)
    assert not (root / "train").exists() and not (root / "manifest.json").exists()


def test_a_killed_runs_scratch_is_removed(tmp_path):
    root = tmp_path / "set"
    stale = root / f"{datasets.SCRATCH_PREFIX}999999999-imagenet"  # no such process
    (stale / "train").mkdir(parents=True)
    info = datasets.ensure_imagenet(root, images=6, progress=False)
    assert not stale.exists()
    assert info["n_classes"] == 5  # default classes: 100, or one per training image when fewer


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"images": 0}, "--images"),
        ({"images": 10, "classes": 20}, "--classes 20"),
        ({"images": 10, "seed": -1}, "--seed"),
        ({"images": 10, "val_fraction": 0.9}, "--val-fraction"),
        ({"images": 10, "processes": 0}, "--processes"),
        ({"images": 10, "formats": ("zip",)}, "unknown dataset format"),
    ],
)
def test_bad_requests_are_refused_before_any_work(tmp_path, kwargs, message):
    with pytest.raises(SizerError, match=message):
        datasets.ensure_imagenet(tmp_path / "x", progress=False, **{"classes": 2, **kwargs})
    assert not (tmp_path / "x").exists()


def test_a_foreign_dataset_is_never_overwritten(tmp_path):
    (tmp_path / "train" / "cat").mkdir(parents=True)
    (tmp_path / "train" / "cat" / "a.JPEG").write_bytes(synth.synth_jpeg(0, 0))
    with pytest.raises(SizerError, match="did not generate"):
        datasets.ensure_imagenet(tmp_path, images=10, classes=2, progress=False)
    assert (tmp_path / "train" / "cat" / "a.JPEG").exists()


def test_accept_real_imagenet_names_what_is_missing(tmp_path):
    with pytest.raises(SizerError, match="does not exist"):
        datasets.accept_real_imagenet(tmp_path / "nope")
    with pytest.raises(SizerError, match="no train/ directory"):
        datasets.accept_real_imagenet(tmp_path)
    (tmp_path / "train").mkdir()
    with pytest.raises(SizerError, match="no class subdirectories"):
        datasets.accept_real_imagenet(tmp_path)
    (tmp_path / "train" / "n01440764").mkdir()
    (tmp_path / "train" / "n01440764" / "notes.txt").write_text("x")
    with pytest.raises(SizerError, match="no .JPEG"):
        datasets.accept_real_imagenet(tmp_path)
    for i, cls in enumerate(("n01440764", "n01443537")):
        (tmp_path / "train" / cls).mkdir(exist_ok=True)
        (tmp_path / "train" / cls / f"{cls}_{i}.JPEG").write_bytes(synth.synth_jpeg(9, i))
    info = datasets.accept_real_imagenet(tmp_path)
    assert not info["synthetic"] and info["n_train"] == 2 and info["n_classes"] == 2
    assert info["median_width"] > 0
    packed = datasets.ensure_packed(tmp_path, "rec", progress=False)
    assert packed["packed_now"] and packed["splits"]["train"]["records"] == 2


def test_ensure_ptb_generates_reuses_and_accepts_a_real_copy(tmp_path):
    corpus = tmp_path / "ptb"
    info = datasets.ensure_ptb(corpus, progress=False)
    assert info["synthetic"] and info["vocabulary"] == synth.PTB_VOCAB
    assert abs(info["splits"]["train"]["tokens"] - 929_000) < 9_290
    stamp = (corpus / "ptb.train.txt").stat().st_mtime_ns
    assert datasets.ensure_ptb(corpus, progress=False)["synthetic"]
    assert (corpus / "ptb.train.txt").stat().st_mtime_ns == stamp
    assert not _scratch_left(tmp_path)

    real = tmp_path / "real"
    real.mkdir()
    (real / "ptb.train.txt").write_text(" the cat sat \n the dog <unk> \n")
    (real / "ptb.valid.txt").write_text(" the cat \n")
    (real / "ptb.test.txt").write_text(" the dog sat \n")
    info = datasets.ensure_ptb(real, progress=False)  # used as it is, never overwritten
    assert not info["synthetic"] and info["vocabulary"] == 6
    assert info["splits"]["train"]["tokens"] == 8
    (real / "ptb.test.txt").write_text(" a bird \n")
    with pytest.raises(SizerError, match="missing from ptb.train.txt"):
        datasets.accept_real_ptb(real)
    (real / "ptb.test.txt").unlink()
    with pytest.raises(SizerError, match="lacks ptb.test.txt"):
        datasets.accept_real_ptb(real)
    with pytest.raises(SizerError, match="part of a corpus"):
        datasets.ensure_ptb(real, progress=False)


# ---------------------------------------------------------------- CLI
def test_cli_data_imagenet_pack_and_ptb(cli, tmp_path):
    out = tmp_path / "set"
    code, stdout, err = cli("data", "imagenet", "--images", "16", "--classes", "2", "--out", out, "--seed", "4",
                            "--processes", "2", "--json")
    assert code == 0, err
    info = json.loads(stdout)
    assert info["n_images"] == 16 and info["seed"] == 4 and info["generated_now"]
    code, stdout, err = cli("data", "pack", out, "--format", "rec", "--json")
    assert code == 0, err
    packed = json.loads(stdout)
    assert packed["format"] == "rec" and packed["splits"]["train"]["records"] == info["n_train"]
    code, stdout, _ = cli("data", "imagenet", "--images", "16", "--classes", "2", "--out", out, "--seed", "4")
    assert code == 0 and "already" in stdout and "per JPEG" in stdout  # the human table, not regenerated
    code, stdout, err = cli("data", "ptb", "--out", tmp_path / "ptb", "--json")
    assert code == 0, err
    assert json.loads(stdout)["vocabulary"] == synth.PTB_VOCAB


@pytest.mark.parametrize(
    "args, message",
    [
        (["data", "imagenet", "--images", "0", "--out", "{tmp}/a"], "--images must be at least 1"),
        (["data", "imagenet", "--images", "5", "--classes", "9", "--out", "{tmp}/a"], "--classes 9 exceeds"),
        (["data", "pack", "{tmp}/missing", "--format", "rec"], "does not exist"),
        (["data", "pack", "{tmp}", "--format", "zip"], "--format must be one of lmdb, rec, tar"),
        (["data", "pack", "{tmp}", "--format", "rec"], "no train/ directory"),
        (["data", "ptb", "--out", "{tmp}/file", "--seed", "-3"], "--seed"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(cli, tmp_path, args, message):
    code, stdout, err = cli(*[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert code == 2
    assert err.startswith("sizer: error: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "a").exists()
