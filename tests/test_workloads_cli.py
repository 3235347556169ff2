"""`sizer workloads` and the pure pieces of the PyTorch workloads (no measuring here)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

import workloads
from workloads import gpu_augment, image_loader, loop, torch_common
from workloads.measure import Meter
from workloads.protocol import Spec

TRAIN = [f"{m}-train" for m in ("alexnet", "vgg16", "googlenet", "resnet50", "inception_v3")]
INFER = [f"{m}-infer" for m in ("alexnet", "vgg16", "googlenet", "resnet50", "inception_v3")]
PYTORCH_WORKLOADS = TRAIN + INFER + ["ptb-lstm-train"]
OTHERS = {"imagenet-preprocess": "images/s", "cpu-calibrate": "images/s"}
MXNET_MODULES = {
    "workloads/mxnet_inception.py": "mxnet-inception-v3-train",
    "workloads/mxnet_ptb_lstm.py": "mxnet-ptb-lstm-train",
}


def test_workloads_json_lists_every_workload_with_unit_framework_and_profiles(cli, repo_root):
    code, out, err = cli("workloads", "--json")
    assert code == 0, err
    rows = {row["name"]: row for row in json.loads(out)}
    expected = set(PYTORCH_WORKLOADS) | set(OTHERS)
    expected |= {name for path, name in MXNET_MODULES.items() if (repo_root / path).exists()}
    assert expected <= set(rows), sorted(expected - set(rows))
    for name in PYTORCH_WORKLOADS:
        assert rows[name]["framework"] == "pytorch"
        assert rows[name]["interpreter"] == "sizer"
    for name in TRAIN + INFER + list(OTHERS):
        assert rows[name]["unit"] == "images/s"
    assert rows["ptb-lstm-train"]["unit"] == "tokens/s"
    for name in expected:
        row = rows[name]
        assert row["profiles"] == ["cpu-small", "gpu"], name
        assert row["stresses"] and row["description"], name
        assert set(row["defaults"]) == {"cpu-small", "gpu"}
    for name in expected - set(PYTORCH_WORKLOADS) - set(OTHERS):  # the MXNet ones
        assert rows[name]["framework"] == "mxnet" and rows[name]["interpreter"] == "mxnet"
    # The default configs say what each profile runs.
    assert rows["resnet50-train"]["defaults"]["gpu"]["model"] == "resnet50"
    assert rows["resnet50-train"]["defaults"]["cpu-small"]["model"] == "resnet18"
    assert rows["inception_v3-train"]["defaults"]["gpu"]["image_size"] == 299


def test_workloads_table_for_people(cli):
    code, out, err = cli("workloads")
    assert code == 0, err
    for name in TRAIN + ["imagenet-preprocess", "ptb-lstm-train", "cpu-calibrate"]:
        assert name in out
    assert "tokens/s" in out and "cpu-small" in out


def test_registry_matches_the_worker_entry_listing(capsys):
    from workloads.__main__ import main

    assert main(["list"]) == 0
    listed = {row["name"] for row in json.loads(capsys.readouterr().out)}
    assert set(PYTORCH_WORKLOADS) | set(OTHERS) <= listed


@pytest.mark.parametrize("name", TRAIN)
def test_train_profiles(name):
    cls = workloads.load_all()[name]
    gpu, small = cls.defaults["gpu"], cls.defaults["cpu-small"]
    assert (gpu["device"], gpu["precision"], gpu["channels_last"]) == ("cuda", "bf16", True)
    assert (small["device"], small["precision"]) == ("cpu", "fp32")
    assert small["image_size"] < gpu["image_size"] and small["batch_size"] < gpu["batch_size"]
    assert gpu["input"] == "files" and gpu["decode"] == "cpu" and gpu["workers"] is None
    # A spec's config overrides the profile's, and an unknown profile is refused.
    cfg = cls().config_for(Spec(workload=name, profile="gpu", config={"decode": "gpu", "workers": 3}))
    assert cfg["decode"] == "gpu" and cfg["workers"] == 3 and cfg["model"] == gpu["model"]
    with pytest.raises(ValueError, match="no profile"):
        cls().config_for(Spec(workload=name, profile="tpu"))


def test_bad_config_values_are_named():
    with pytest.raises(ValueError, match="input='floppy'"):
        torch_common.check_choice({"input": "floppy"}, "input", image_loader.INPUTS)
    with pytest.raises(ValueError, match="model='lenet'"):
        torch_common.build_cnn("lenet", "cpu", False)
    with pytest.raises(ValueError, match="precision"):
        torch_common.autocast("cpu", "fp8")


def test_loader_workers_follow_the_shape_and_warmup_covers_the_prefetch_depth():
    assert image_loader.loader_workers({"workers": None}, 1) == 1  # one worker even at 1 vCPU
    assert image_loader.loader_workers({"workers": None}, 16) == 16
    assert image_loader.loader_workers({"workers": 3}, 16) == 3
    assert image_loader.loader_workers({"workers": 0}, 16) == 0
    # 11 workers x prefetch 4: 44 batches are read ahead before the first step; warm-up exceeds that.
    assert image_loader.warmup_batches({"prefetch_factor": 4, "warmup_steps": 3}, 11) == 47
    assert image_loader.warmup_batches({"prefetch_factor": 2, "warmup_steps": 3}, 0) == 5


def test_run_epochs_marks_cold_and_warm_passes_and_counts_the_first_pass(fake_clock):
    loader = [i for i in range(6)]  # 6 batches an epoch
    meter = Meter(warmup_steps=2, time_budget_s=60, min_steps=14, min_seconds=0.0, n_windows=2, gpu=False,
                  clock=fake_clock)
    extra: dict = {}
    seen = []

    def step(batch):
        seen.append(batch)
        fake_clock.sleep(0.25)
        return 4.0

    steps = loop.run_epochs(meter, loader, step, loop.StepClock("cpu", clock=fake_clock), extra)
    assert steps == len(seen) == len(meter.steps) == 2 + 14  # steady steps: done at min_steps
    assert seen[:12] == loader + loader  # epochs repeat the loader
    assert meter.phases == {"cold": 0, "warm": 6}
    assert extra["cold_samples"] == 24.0 and extra["cold_read_bytes"] >= 0
    assert extra["epochs"] == pytest.approx(steps / 6)
    assert sum(1 for s in meter.steps if s[2]) == 2  # warm-up flagged


def test_run_epochs_counts_passes_in_samples_over_an_endless_loader(fake_clock):
    loader = image_loader.EndlessPasses(10, shuffle=True, seed=1)  # any endless iterable: here, indices
    meter = Meter(warmup_steps=1, time_budget_s=2, min_steps=25, min_seconds=0.0, n_windows=2, gpu=False,
                  clock=fake_clock)
    extra: dict = {}

    def step(batch) -> float:
        fake_clock.sleep(0.05)
        return 3.0

    steps = loop.run_epochs(meter, loader, step, loop.StepClock("cpu", clock=fake_clock), extra, pass_samples=30.0)
    assert steps == 1 + 25  # steady steps: done at min_steps, within the budget
    assert meter.phases == {"cold": 0, "warm": 10}  # 10 steps of 3 samples make the first pass
    assert extra["cold_samples"] == 30.0 and extra["epochs"] == pytest.approx(steps * 3 / 30)


def test_endless_passes_visit_every_sample_once_per_pass():
    import itertools

    for shuffle in (True, False):
        first = list(itertools.islice(iter(image_loader.EndlessPasses(7, shuffle, seed=3)), 21))
        passes = [first[0:7], first[7:14], first[14:21]]
        assert all(sorted(p) == list(range(7)) for p in passes)
        assert (passes[0] != passes[1]) == shuffle  # a new order every pass when shuffling
        assert first == list(itertools.islice(iter(image_loader.EndlessPasses(7, shuffle, seed=3)), 21))  # seeded


def test_raw_batches_travel_as_one_tensor_and_split_back():
    import torch

    items = [(torch.tensor([1, 2, 3], dtype=torch.uint8), 4), (torch.tensor([9], dtype=torch.uint8), 7)]
    flat, lengths, labels = gpu_augment.collate_raw(items)
    assert flat.dim() == 1 and flat.dtype == torch.uint8 and lengths == [3, 1]
    assert [t.tolist() for t in gpu_augment.split_raw(flat, lengths)] == [[1, 2, 3], [9]]
    assert labels.tolist() == [4, 7]


def test_random_resized_crop_box_follows_torchvision_ranges():
    import random

    rng = random.Random(0)
    for height, width in [(375, 500), (500, 333), (64, 1000), (224, 224)]:
        for _ in range(200):
            top, left, h, w = gpu_augment.random_resized_crop_box(height, width, rng)
            assert 0 <= top and top + h <= height and 0 <= left and left + w <= width and h > 0 and w > 0
            # Either a sampled crop (area share in [0.08, 1], aspect in [3/4, 4/3] up to rounding) or the fallback.
            share = h * w / (height * width)
            assert 0.07 <= share <= 1.0
            assert 0.7 <= w / h <= 1.4 or (h, w) in ((height, round(height * 4 / 3)), (round(width * 3 / 4), width))


def test_step_clock_on_cpu_reports_every_step_at_once():
    clock = loop.StepClock("cpu")
    clock.start()
    out = clock.tick(8.0)
    assert len(out) == 1 and out[0][1] == 8.0 and out[0][0] >= 0
    assert clock.flush() == []


def test_resize_short_side_keeps_aspect_and_draft_never_goes_below_target():
    from PIL import Image

    from workloads.imagenet_preprocess import resize_short_side

    buf = io.BytesIO()
    Image.new("RGB", (500, 375), (120, 30, 200)).save(buf, "JPEG", quality=90)
    for draft in (True, False):
        for short in (256, 32):
            out = Image.open(io.BytesIO(resize_short_side(buf.getvalue(), short, 90, draft)))
            assert out.format == "JPEG"
            assert min(out.size) == short and out.size[0] == round(500 * short / 375)


def test_read_corpus_adds_end_of_sentence_and_builds_the_vocabulary(tmp_path: Path):
    from workloads.ptb_corpus import read_corpus

    path = tmp_path / "ptb.train.txt"
    path.write_text(" the cat sat \n the <unk> sat on N mats \n")
    ids, vocab = read_corpus(path)
    assert list(vocab) == ["the", "cat", "sat", "<eos>", "<unk>", "on", "N", "mats"]
    assert ids == [0, 1, 2, 3, 0, 4, 2, 5, 6, 7, 3]


def test_bptt_windows_cover_the_stream_with_shifted_targets():
    import torch

    from workloads.ptb_corpus import BpttWindows

    data = torch.arange(50).view(25, 2)  # 25 steps x batch 2
    windows = list(BpttWindows(data, 7))
    assert len(windows) == len(BpttWindows(data, 7)) == 4
    assert [w[0] for w in windows] == [0, 7, 14, 21]
    assert [len(w[1]) for w in windows] == [7, 7, 7, 3]
    for _, x, y in windows:
        assert torch.equal(y, x + 2)  # each target is the next token of its column


@pytest.mark.parametrize(
    "name, message",
    [
        ("resnet50-train", "no image folder"),
        ("resnet50-infer", "no image folder"),
        ("imagenet-preprocess", "no image folder"),
        ("ptb-lstm-train", "no ptb.train.txt"),
    ],
)
def test_prepare_names_missing_data(name, message, tmp_path):
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        workloads.get(name).prepare(Spec(workload=name, profile="cpu-small", data_dir=str(tmp_path)))


def test_prepare_accepts_synthetic_input_without_data():
    workloads.get("resnet50-train").prepare(Spec(workload="resnet50-train", config={"input": "synthetic"}))
