"""The loader-overhead script's ladder from the loader alone to training: its choice of variants,
what each CPU consumer does with a batch, and a measured loader run whose consumer shares the
workers' CPUs."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")

from workloads import formats, synth  # noqa: E402
from workloads import torch_common as tc  # noqa: E402


def test_an_unknown_variant_is_one_line_and_exit_2(benchmark, capsys):
    lo = benchmark("loader_overhead")
    assert lo.main(["--variants", "calib,warm-trian"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "warm-trian" in err and "warm-train" in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="this host has a GPU")
def test_variants_that_need_a_gpu_are_refused_before_any_work_without_one(benchmark, capsys, tmp_path, monkeypatch):
    lo = benchmark("loader_overhead")
    monkeypatch.setattr(lo, "images_at", lambda *a: pytest.fail("measured without a GPU"))
    assert lo.main(["--variants", "calib,warm-copy,warm-pin,warm-train-registered"]) == 2
    err = capsys.readouterr().err
    assert "warm-pin" in err and "warm-train-registered" in err and "warm-copy" not in err


def test_the_copy_consumer_copies_the_pixels_into_one_reused_buffer(benchmark):
    lo = benchmark("loader_overhead")
    use = lo.Consumer("copy", recycler=None)
    assert not use.pins
    first = torch.randint(0, 255, (4, 8, 8, 3), dtype=torch.uint8)
    use((first, torch.zeros(4, dtype=torch.long)))
    (spare,) = use.spare.values()
    assert torch.equal(spare, first) and spare.data_ptr() != first.data_ptr()
    second = torch.randint(0, 255, (4, 8, 8, 3), dtype=torch.uint8)
    use((second, torch.zeros(4, dtype=torch.long)))
    assert len(use.spare) == 1 and torch.equal(use.spare[(4, 8, 8, 3)], second)


def test_the_summary_compares_with_the_calibration_only_where_one_ran(benchmark):
    lo = benchmark("loader_overhead")
    cost = {"user_ms": 2.0, "sys_ms": 0.1, "faults": 10.0}
    rows = {"calib": [400.0, 300.0], "warm": [350.0]}
    costs = {"calib": [cost, cost], "warm": [{**cost, "consumer_ms": 0.02}]}
    table = {t["variant"]: t for t in lo.summary_table(rows, costs)}
    assert table["calib"]["over_calib"] == 1.0 and table["calib"]["consumer_ms_per_image"] is None
    assert table["warm"]["over_calib"] == 1.0 and table["warm"]["consumer_ms_per_image"] == 0.02
    assert lo.summary_table({"warm": [350.0]}, {"warm": [cost]})[0]["over_calib"] is None


def test_a_loader_run_with_the_consumer_on_the_workers_cpus_measures_both(benchmark, tmp_path):
    lo = benchmark("loader_overhead")
    synth.generate_imagenet(tmp_path, 96, 4, seed=3, val_fraction=0.0, processes=1)
    samples = formats.open_image_dataset(tmp_path, "files", "train")
    cpus = sorted(os.sched_getaffinity(0))
    rate, cost = lo.loader_rate(samples, cpus, cpus, 2, 16, 1.0, 0, consumer="copy")
    assert rate > 0
    assert cost["user_ms"] > 0.1  # the workers decoded: milliseconds of CPU per image
    assert cost["consumer_ms"] > 0  # the consumer's own process copied every batch
    assert sorted(os.sched_getaffinity(0)) == cpus  # given back


def test_a_recycler_tells_its_buffers_from_fresh_blocks(tmp_path):
    synth.generate_imagenet(tmp_path, 24, 3, seed=5, val_fraction=0.0, processes=1)
    samples = formats.open_image_dataset(tmp_path, "files", "train")
    dataset = tc.ImageSamples(samples, tc.eval_transform(32, 36), read_threads=0)
    loader = tc.make_loader(dataset, 6, 2, 2, pin_memory=False, shuffle=False, seed=0, recycle_batches=True)
    with tc.closing_loader(loader):
        it = iter(loader)
        held = [next(it)[0] for _ in range(16)]  # twice the buffers: the rest are fresh blocks
        recycled = [dataset.recycler.is_recycled(images) for images in held]
    assert 0 < sum(recycled) <= 8 and sum(recycled) < len(held)
    assert not dataset.recycler.is_recycled(torch.empty(6, 32, 32, 3, dtype=torch.uint8))


def test_from_file_prints_a_saved_run_and_a_bad_file_is_exit_2(benchmark, tmp_path, capsys):
    lo = benchmark("loader_overhead")
    cost = {"user_ms": 2.5, "sys_ms": 0.1, "faults": 12.0}
    table = lo.summary_table({"calib": [350.0], "warm-train": [315.0]},
                             {"calib": [cost], "warm-train": [{**cost, "consumer_ms": 0.31}]})
    saved = tmp_path / "run.json"
    saved.write_text(__import__("json").dumps({
        "workers": 8, "worker_cpus": list(range(8, 16)), "consumer_cpus": list(range(8, 16)),
        "consumer_shares_worker_cpus": True, "images": 45000, "batch": 256, "repeats": 1, "table": table}))
    assert lo.main(["--from", str(saved)]) == 0
    out = capsys.readouterr().out
    assert "shared with the workers" in out
    (row,) = [line for line in out.splitlines() if line.startswith("warm-train")]
    assert "0.90" in row and "0.31" in row
    saved.write_text("{}")
    assert lo.main(["--from", str(saved)]) == 2
    assert "cannot read a run" in capsys.readouterr().err


def test_a_failing_variant_is_reported_and_the_others_still_measured(benchmark, monkeypatch, capsys):
    lo = benchmark("loader_overhead")
    real = lo.loader_rate

    def failing_copy(*args, **kwargs):
        if args[-2] == "copy":  # measure_variant passes the consumer, then whether batches come in order
            raise RuntimeError("cudaHostRegister said no")
        return real(*args, **kwargs)

    monkeypatch.setattr(lo, "loader_rate", failing_copy)
    assert lo.main(["--variants", "calib,warm-copy,warm", "--images", "200", "--batch", "16", "--seconds", "0.5",
                    "--repeats", "2", "--json"]) == 0
    run = __import__("json").loads(capsys.readouterr().out)
    assert [t["variant"] for t in run["table"]] == ["calib", "warm"]
    assert all(len(t["runs"]) == 2 and t["images_per_s_per_cpu"] > 0 for t in run["table"])
    assert "cudaHostRegister said no" in run["errors"]["warm-copy"]
