"""The PyTorch-side workloads measure real points in their cpu-small profile over real files: JPEG
folders and LMDB / RecordIO / tar shards, a PTB-format corpus. Training and inference run end to
end on the cheapest model of each (ResNet-18 and AlexNet at cpu-small); every other model builds
and steps on a small batch at its cpu-small size, which is what differs between them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import workloads
from workloads.protocol import Result, Spec

pytestmark = pytest.mark.slow

BUDGET_S = 2.0  # each point's warm-up and window, from the end of its first step
COUNTERS = ("cpu_seconds", "cpu_util_per_vcpu", "peak_rss_bytes", "rss_bytes", "read_bytes", "measured_seconds",
            "measured_samples", "page_cache_bytes")


@pytest.fixture(scope="module")
def imagenet(tmp_path_factory) -> Path:
    from sizer.datasets import ensure_imagenet

    root = tmp_path_factory.mktemp("imagenet")
    ensure_imagenet(root, images=320, seed=3, formats=("files", "lmdb", "rec", "tar"), val_fraction=0.25,
                    progress=False, classes=8, processes=2)
    return root


@pytest.fixture(scope="module")
def ptb(tmp_path_factory) -> Path:
    from sizer.datasets import ensure_ptb

    root = tmp_path_factory.mktemp("ptb")
    ensure_ptb(root, seed=5, progress=False)
    return root


def measure(name: str, data_dir: Path, work_dir: Path, config: dict | None = None, vcpus: int = 2,
            steps: int | None = None) -> Result:
    """One point; with `steps`, a window of exactly that many steps, however fast the host steps."""
    budget, spread_target, config = BUDGET_S, 0.05, dict(config or {})
    if steps is not None:  # the window ends at its first check past `steps`: a spread target any window meets
        budget, spread_target = 600.0, 1e9
        config.update(min_steps=steps, min_seconds=0)
    spec = Spec(workload=name, profile="cpu-small", vcpus=vcpus, data_dir=str(data_dir), work_dir=str(work_dir),
                config=config, time_budget_s=budget, spread_target=spread_target)
    result = workloads.get(name).run(spec)
    assert result.status in ("ok", "noisy"), result.error
    assert result.profile == "cpu-small" and result.throughput > 0
    for key in COUNTERS:
        assert key in result.counters, key
    assert result.counters["cpu_seconds"] > 0 and result.counters["peak_rss_bytes"] > 20 * 2**20
    assert result.counters["measured_samples"] > 0
    # Warm-up steps are kept, flagged, and out of the figure; the spread of the windows is reported.
    assert any(s[2] for s in result.steps) and any(not s[2] for s in result.steps)
    assert result.window_rates and result.spread >= 0
    assert min(result.window_rates) <= result.throughput <= max(result.window_rates)
    assert result.limits_seen["cpus_allowed"]
    return result


TRAIN_MODELS = ["resnet50-train", "alexnet-train", "googlenet-train", "vgg16-train", "inception_v3-train"]
INFER_MODELS = ["resnet50-infer", "alexnet-infer", "googlenet-infer", "vgg16-infer", "inception_v3-infer"]


# A smaller step than cpu-small's, where the reading is what a test checks: a third of the time.
SMALL_STEP = {"image_size": 64, "batch_size": 8}


@pytest.mark.parametrize("fmt", ["files", "lmdb", "rec", "tar"])
def test_training_point_from_files_and_shards(fmt, imagenet, tmp_path):
    name = "resnet50-train"  # the cheapest model at cpu-small (ResNet-18, 112 px); the others step below
    # JPEG files at the profile's own step, as a sweep measures them; the shards read at a smaller one.
    r = measure(name, imagenet, tmp_path, {"input": fmt, **({} if fmt == "files" else SMALL_STEP)})
    cls = workloads.load_all()[name]
    assert r.unit == "images/s" and r.framework == "pytorch"
    assert r.config["model"] == cls.defaults["cpu-small"]["model"] and r.config["input"] == fmt
    assert r.extra["loader_workers"] == 2 and r.extra["dataset_images"] == 240
    assert 0 < r.extra["dataset_gib"] < 0.1
    assert r.extra["loss_first"] > 0 and r.extra["loss_last"] == r.extra["loss_last"]  # real, finite steps
    assert r.counters["warmup_steps"] >= 2 * 2 + 3  # past the prefetch depth (2 workers x 2)
    assert "cold_rate" in r.extra
    # The workers' decoding is part of their CPU time per image, not more (nor per batch).
    assert 0 < r.counters["decode_cpu_ms_per_image"] <= 1.25 * r.counters["loader_cpu_ms_per_sample"]


def _cpu_small(name: str) -> dict:
    return workloads.get(name).config_for(Spec(workload=name, profile="cpu-small"))


@pytest.mark.parametrize("name", TRAIN_MODELS)
def test_each_training_model_steps_at_its_cpu_small_size(name):
    """The workload's own model and SGD step, as its point builds them, on two small batches."""
    import torch

    from workloads.imagenet_train import _sgd_step
    from workloads.torch_common import NUM_CLASSES, synthetic_images

    cfg = _cpu_small(name)
    torch.manual_seed(0)
    step = _sgd_step(cfg, "cpu")
    x = synthetic_images(4, int(cfg["image_size"]), "cpu", bool(cfg["channels_last"]))
    y = torch.randint(0, NUM_CLASSES, (4,))
    losses = [float(step(x, y).detach()) for _ in range(2)]
    assert all(0 < loss < 100 for loss in losses), losses  # finite: the model trains at this size
    assert losses[1] != losses[0]  # the first step changed the weights


@pytest.mark.parametrize("name", INFER_MODELS)
def test_each_inference_model_infers_at_its_cpu_small_size(name):
    """The workload's own model, in eval mode as its point builds it, and its timed step on a batch."""
    from workloads.imagenet_infer import _TimedInference
    from workloads.torch_common import build_cnn, synthetic_images

    cfg = _cpu_small(name)
    model = build_cnn(cfg["model"], "cpu", bool(cfg["channels_last"]), aux_logits=False)
    model.eval()
    timed = _TimedInference(model, "cpu", cfg["precision"], None)
    x = synthetic_images(2, int(cfg["image_size"]), "cpu", bool(cfg["channels_last"]))
    assert [timed((x, None)) for _ in range(2)] == [2.0, 2.0]
    extra: dict = {}
    timed.report(extra, warmup=1)
    assert extra["latency_batches"] == 1 and extra["batch_latency_p50_ms"] > 0


def test_training_on_synthetic_input_skips_the_loader(imagenet, tmp_path):
    r = measure("resnet50-train", imagenet, tmp_path, {"input": "synthetic", **SMALL_STEP})
    assert "loader_workers" not in r.extra and "epochs" not in r.extra


def test_inference_on_synthetic_input_skips_the_loader_and_times_the_model(imagenet, tmp_path):
    r = measure("resnet50-infer", imagenet, tmp_path, {"input": "synthetic"})
    assert r.throughput > 0 and r.status in ("ok", "noisy")
    assert "loader_workers" not in r.extra and "dataset_images" not in r.extra
    assert "drained_batches" not in r.counters  # nothing read ahead to drain
    # The model alone: its share of a batch is the whole step, at the measured rate.
    batch = r.config["batch_size"]
    assert 0 < r.extra["batch_latency_p50_ms"] <= 1000 * batch / r.throughput * 1.5


@pytest.mark.parametrize("name, fmt", [("resnet50-infer", "files"), ("alexnet-infer", "tar")])
def test_inference_point_with_latency_percentiles(name, fmt, imagenet, tmp_path):
    r = measure(name, imagenet, tmp_path, {"input": fmt})
    assert r.extra["dataset_images"] == 80  # the val split
    assert 0 < r.extra["batch_latency_p50_ms"] <= r.extra["batch_latency_p99_ms"]
    assert r.counters["decode_cpu_ms_per_image"] > 0  # the workers' decode and resize, timed
    # The model's share of a batch's time cannot exceed the whole step's, at the measured rate.
    batch = r.config["batch_size"]
    assert r.extra["batch_latency_p50_ms"] < 1000 * batch / r.throughput * 1.5


@pytest.mark.parametrize("fmt", ["lmdb", "rec", "tar"])
def test_preprocess_writes_shards_that_read_back(fmt, imagenet, tmp_path):
    from PIL import Image

    from workloads import formats

    r = measure("imagenet-preprocess", imagenet, tmp_path, {"format": fmt, "keep_output": True, "chunk": 8})
    e = r.extra
    assert e["complete_pass"] and e["images_done"] == 240 and e["processes"] == 2
    assert e["read_mb_s"] > 0 and e["write_mb_s"] > 0 and e["encoded_bytes"] < e["input_bytes"] / 10
    reader = formats.open_packed(e["output_dir"], fmt, "train")
    assert len(reader) == 240
    labels = set()
    for i in range(0, 240, 37):
        data, label = reader[i]
        assert min(Image.open(io_bytes(data)).size) == 32  # cpu-small short side
        labels.add(label)
    assert len(labels) > 1


def io_bytes(data: bytes):
    import io

    return io.BytesIO(data)


def test_ptb_lstm_loss_falls_on_the_synthetic_corpus(ptb, tmp_path):
    r = measure("ptb-lstm-train", ptb, tmp_path, steps=30)  # 30 steps, not as many as a budget allows
    assert sum(1 for s in r.steps if not s[2]) == 30
    assert r.unit == "tokens/s"
    assert r.extra["vocabulary"] == 10_000
    assert r.extra["loss_end"] < r.extra["loss_start"] - 0.3, r.extra
    assert r.extra["loss_end"] < r.extra["loss_start_measured"]


def test_ptb_lstm_loss_falls_on_a_real_format_corpus(tmp_path):
    # PTB's own layout: lowercase words, numbers as N, rare words as <unk>, a space before and after.
    sentences = [
        "the company said its third-quarter profit rose N N",
        "mr. <unk> is chairman of this <unk> company",
        "the market fell sharply in heavy trading",
        "shares of the bank closed at $ N",
        "analysts said the stock may rise next year",
        "the government said sales of new homes fell",
    ]
    import random

    rng = random.Random(1)
    corpus = tmp_path / "ptb.train.txt"
    corpus.write_text("".join(f" {rng.choice(sentences)} \n" for _ in range(3000)))
    r = measure("ptb-lstm-train", tmp_path, tmp_path, steps=30)
    assert r.extra["vocabulary"] == len({w for s in sentences for w in s.split()}) + 1
    # From about ln(36) = 3.6 nats at random init; 30 steps must bring it down.
    assert r.extra["loss_end"] < r.extra["loss_start"] - 0.1, r.extra
    assert r.extra["loss_end"] < r.extra["loss_start_measured"], r.extra


def test_cpu_calibrate_pins_one_vcpu_and_gives_the_cpus_back(tmp_path):
    before = os.sched_getaffinity(0)
    r = measure("cpu-calibrate", Path(""), tmp_path)
    assert os.sched_getaffinity(0) == before
    assert r.extra["cpu"] in before and r.config["image_size"] == 224
    assert r.counters["cpu_util_per_vcpu"] <= 1.3  # one process, one vCPU
    assert r.counters["read_bytes"] < 1e6  # the images are in memory
    # Its one busy thread's CPU per image, timed as the loader workers time their decoding, is at most
    # the wall time per image it measured (less what the host took from the thread, a share that
    # moves with the host's load).
    assert 0 < r.counters["decode_cpu_ms_per_image"] * r.throughput / 1000 <= 1.1


def test_worker_entry_runs_a_point_and_reports_bad_config(imagenet, tmp_path, repo_root):
    spec = Spec(workload="resnet50-train", profile="cpu-small", vcpus=2, data_dir=str(imagenet),
                work_dir=str(tmp_path), time_budget_s=BUDGET_S)
    (tmp_path / "spec.json").write_text(spec.to_json())
    proc = subprocess.run([sys.executable, "-m", "workloads", "run", "--spec", str(tmp_path / "spec.json"),
                           "--out", str(tmp_path / "out.json")], cwd=repo_root, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = Result.from_json((tmp_path / "out.json").read_text())
    assert r.status in ("ok", "noisy") and r.throughput > 0 and r.wall_s > 0
    assert r.config["model"] == "resnet18" and r.counters["peak_rss_bytes"] > 0
    speed = r.extra["host_speed"]  # the host's moment on one of the point's vCPUs, before and after
    assert speed["before_mbps"] > 0 and speed["after_mbps"] > 0
    assert 0.0 <= r.counters["steal_share"] <= 1.0
    # The start's stages, in the order they happen (the loader's workers forked before the model is
    # built, so they decode while it is), then the meter and the first step.
    t = r.extra["timeline_s"]
    assert 0 < t["torch_imported"] < t["data_opened"] <= t["model_built"] <= t["meter_created"] < t["first_step_done"]
    # The window's CPU taken apart: the loader workers decoded, the training process stepped. (On
    # CPU the training step takes most of the window and the workers' share moves with the host, one
    # run here 0.08 cores, so only its presence is asserted.)
    c = r.counters
    assert c["loader_cpu_cores"] > 0.02 and c["main_thread_cores"] > 0.1
    assert c["cpu_ms_per_sample"] > c["loader_cpu_ms_per_sample"] > 0 and 0.0 <= c["cpu_system_share"] < 1.0
    assert json.loads((tmp_path / "out.json").read_text())["schema_version"] == 1

    bad = Spec(workload="resnet50-train", profile="cpu-small", data_dir=str(imagenet), config={"input": "floppy"})
    (tmp_path / "bad.json").write_text(bad.to_json())
    proc = subprocess.run([sys.executable, "-m", "workloads", "run", "--spec", str(tmp_path / "bad.json"),
                           "--out", str(tmp_path / "bad-out.json")], cwd=repo_root, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1
    r = Result.from_json((tmp_path / "bad-out.json").read_text())
    assert r.status == "error" and "input='floppy'" in r.error


def test_inception_v3_auxiliary_logits_enter_the_loss_at_299_px():
    """The gpu profile's Inception v3 trains with its auxiliary head; checked here on the CPU."""
    import torch

    from workloads import torch_common as tc

    torch.manual_seed(0)
    model = tc.build_cnn("inception_v3", "cpu", channels_last=True)
    model.train()
    x = torch.randn(2, 3, 299, 299).contiguous(memory_format=torch.channels_last)
    y = torch.tensor([1, 2])
    out = model(x)
    assert out.aux_logits is not None
    loss_fn = torch.nn.CrossEntropyLoss()
    loss = tc.logits_and_loss(out, y, loss_fn)
    expected = loss_fn(out.logits, y) + 0.4 * loss_fn(out.aux_logits, y)
    assert torch.allclose(loss, expected)
    loss.backward()
    assert model.AuxLogits.fc.weight.grad is not None


def test_registered_buffers_off_a_gpu_is_a_clear_error_before_the_loader_starts(imagenet, tmp_path):
    spec = Spec(workload="resnet50-train", profile="cpu-small", vcpus=1, data_dir=str(imagenet), work_dir=str(tmp_path),
                config={"register_buffers": True}, time_budget_s=BUDGET_S)
    from workloads.measure import _STAGES

    stages = dict(_STAGES)
    with pytest.raises(ValueError, match="register_buffers needs device=cuda"):
        workloads.get("resnet50-train").run(spec)
    # Raised before any loader worker or model exists: the data was never opened, no model built.
    assert {k: v for k, v in _STAGES.items() if stages.get(k) != v}.keys() <= {"torch_imported"}


def test_cudnn_autotuning_is_off_unless_a_config_asks_for_it(monkeypatch):
    """Each point is a fresh process: cuDNN's autotuning would cost every GPU point seconds of its
    first step (4.6 s against 0.7 s on an H100) for no steadier rate, so it runs only when asked."""
    import torch

    from workloads import torch_common as tc

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # only flags are set, no kernel runs
    flags = (torch.backends.cudnn.benchmark, torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    threads = torch.get_num_threads()
    try:
        for name in ("resnet50-train", "resnet50-infer", "ptb-lstm-train"):
            cfg = workloads.get(name).defaults["gpu"]
            assert cfg["cudnn_benchmark"] is False
            torch.backends.cudnn.benchmark = True
            assert tc.setup_device(cfg, 1, 0) == "cuda" and torch.backends.cudnn.benchmark is False
            tc.setup_device({**cfg, "cudnn_benchmark": True}, 1, 0)
            assert torch.backends.cudnn.benchmark is True
    finally:
        torch.backends.cudnn.benchmark, torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = flags
        torch.set_num_threads(threads)
