"""The report's context (plain data from points and fits), its outputs and `sizer report`."""

from __future__ import annotations

import dataclasses
import json
import re
import time
from pathlib import Path

import pytest
from test_report_fixtures import H100, make_points

from sizer.errors import SizerError
from sizer.points import read_points_csv, write_points_csv
from sizer.report import (
    RESULTS_SCHEMA_VERSION,
    build_context,
    inputs_from_store,
    quality_warnings,
    render_html,
    write_outputs,
)
from sizer.sizing.knee import measured_knees
from sizer.sizing.ram import OutOfMemory, out_of_memory
from sizer.store import Store
from workloads.protocol import Result

HOSTILE = "lstm-<script>alert('x')</script>&\"quoted\""


def store_with_points(path: Path, points, *, gpu_name: str = H100, calibration: float = 150.0) -> Path:
    """A real store holding `points` as one sweep, as `sizer sweep` leaves it (host, calibration, limits)."""
    host = {
        "hostname": "gpu-host-1",
        "kernel": "6.1.0",
        "os": "Linux-6.1.0-x86_64",
        "cpu": {"model": "Test CPU 9000", "hardware_threads": 32, "physical_cores": 16, "smt": True},
        "memory": {"total_gib": 128.0},
        "gpu": {"count": 1 if gpu_name else 0, "devices": [{"name": gpu_name}] if gpu_name else [], "driver": "575.1",
                "reason": None if gpu_name else "no NVIDIA driver"},
        "frameworks": {"torch": {"version": "2.14.1"}},
        "limits": {"backend": "cgroup-v2", "writable": ["cpuset", "cpu", "memory", "io"], "placement": "sizer subtree",
                   "notes": ["RAM limit includes the page cache"]},
    }
    with Store(path) as store:
        host_id = store.upsert_host(host)
        sweep_id = store.start_sweep(host_id, "sizer sweep --workloads resnet50-train --vcpus 1,2,4", {"plan": 1})
        store.set_calibration(sweep_id, {"workload": "cpu-calibrate", "status": "ok", "ips_per_vcpu": calibration})
        for i, p in enumerate(points):
            samples = 1000
            result = Result(
                workload=p.workload, framework="pytorch", unit=p.unit, profile=p.profile, status=p.status,
                throughput=p.throughput, spread=p.spread, bottleneck=p.bottleneck,
                counters={"measured_samples": samples, "read_bytes": (p.read_mb_per_sample or 0) * 1e6 * samples,
                          "peak_rss_bytes": (p.footprint_gib or 0) * 2**30, "gpu_name": p.gpu_model,
                          **({"gpu_util_pct": p.gpu_util_pct} if p.gpu_util_pct is not None else {}),
                          # the window's CPU cost, where a test gives it (`--cpu-cost` reads it)
                          **({"cpu_util_per_vcpu": p.cpu_util_per_vcpu,
                              "cpu_ms_per_sample": p.cpu_ms_per_sample} if p.cpu_ms_per_sample else {})},
                config={"input": p.input, "decode": p.decode},
                extra={"dataset_gib": p.dataset_gib},
            )
            memory = "not enforced" if p.input == "synthetic" else f"memory.max={int(p.ram_gib * 2**30)}"
            enforced = {"backend": "cgroup-v2", "cpus": f"cpuset 0-{p.vcpus - 1}", "memory": memory,
                        "disk": "not throttled" if p.disk_class == "local-nvme" else f"io.max {p.disk_class}"}
            shape = {"vcpus": p.vcpus, "ram_gib": p.ram_gib, "disk_class": p.disk_class}
            store.add_point(sweep_id, f"p{i}", shape, result, enforced, time.time())
    return path


@pytest.fixture(scope="module")
def points():
    return make_points()


@pytest.fixture(scope="module")
def context(points):
    return build_context(points, gpu="H100", command="sizer report --input p.csv --out r --gpu H100")


def _workload(ctx, name="resnet50-train"):
    return next(w for w in ctx["workloads"] if w["workload"] == name)


# ------------------------------------------------------------------ the context
def test_context_is_plain_versioned_json(context):
    assert context["schema_version"] == RESULTS_SCHEMA_VERSION == 1
    assert json.loads(json.dumps(context)) == context  # no objects, NaN or tuples survive
    assert context["target"] == {"gpu": "H100", "source": "--gpu", "host_gpus": [H100], "illustrative": False}
    assert context["reproduce"]["command"].startswith("sizer report")


def test_knee_and_needs_match_the_construction(context):
    wl = _workload(context)
    # Built with 150 images/s per vCPU, sigma 0.02, ceiling 1200: 8 vCPUs give 1052 (< 95%), 12 give 1475.
    (knee,) = wl["knee"]["by_decode"]
    assert knee["decode"] == "cpu" and knee["knee_vcpus"] == 12 and knee["measured_vcpus"] == [1, 2, 4, 8, 12, 16]
    assert knee["ceiling"] == pytest.approx(1200, rel=0.02)
    # The model: 9 vCPUs give 1164 >= 1140, 8 give 1052.
    assert wl["knee"]["predicted_vcpus"] == 9
    # Page cache: the standard disk (140 MB/s, 0.3 MB/sample) keeps up once (m - 2) / 16 >= 0.59: m >= 11.45 GiB.
    needs = {d["disk_class"]: d["min_ram_gib"] for d in wl["needs"]["by_disk"]}
    assert needs["standard"] == pytest.approx(11.5, abs=0.5)
    assert needs["ssd"] == pytest.approx(4.0, abs=0.5)
    assert needs["local-nvme"] == pytest.approx(2.0, abs=0.3)  # below the footprint the shape is killed
    assert wl["needs"]["disk_class"] == "local-nvme" and wl["needs"]["ram_gib"] == needs["local-nvme"]


def test_model_points_and_curves_come_from_the_fit(context, points):
    wl = _workload(context)
    params = {p["name"]: p for p in wl["model"]["params"]}
    assert params["per_vcpu"]["value"] == pytest.approx(150, rel=0.03) and params["per_vcpu"]["source"] == "fit"
    assert params["per_vcpu"]["low"] < params["per_vcpu"]["value"] < params["per_vcpu"]["high"]
    assert wl["model"]["loo_median_ape"] < 0.03
    assert len(wl["points"]) == len(points)
    fitted = [p for p in wl["points"] if p["predicted"] is not None]
    assert len(fitted) == len(points) - 1  # every real point; the GPU-alone point has no residual
    assert max(abs(p["error"]) for p in fitted) < 0.05
    curve = wl["curves"]["vcpu"]
    assert curve["ram_gib"] == 32 and curve["vcpus"][0] == 1 and curve["vcpus"][-1] >= 16
    assert set(curve["by_disk"]) == {"local-nvme", "ssd", "standard"}
    # At 32 GiB the dataset (16 GiB + 2 GiB footprint) is cached: every disk class gives the same curve.
    assert curve["by_disk"]["standard"] == pytest.approx(curve["by_disk"]["local-nvme"])
    assert curve["by_disk"]["local-nvme"][0] == pytest.approx(150, rel=0.03)


def test_figures_follow_the_measurements(points):
    """Nothing is a constant: doubling every measured rate doubles the ceiling and the prediction."""
    doubled = [dataclasses.replace(p, throughput=2 * p.throughput) for p in make_points()]
    base = _workload(build_context(points, gpu="H100"))
    twice = _workload(build_context(doubled, gpu="H100"))
    assert twice["ceiling"] == pytest.approx(2 * base["ceiling"], rel=1e-6)
    assert twice["model"]["params"] != base["model"]["params"]
    assert twice["recommendation"]["ceiling"] == pytest.approx(2 * base["recommendation"]["ceiling"], rel=1e-6)


def test_recommendation_and_catalog_rows(context):
    wl = _workload(context)
    rec = wl["recommendation"]
    chosen = rec["chosen"]
    assert chosen["meets"] and chosen["predicted"] >= (1 - context["tolerance"]) * rec["ceiling"] * 0.999
    assert chosen["price_source"] and "price_date" in chosen
    assert chosen["instance_type"] in wl["summary"] and chosen["disk_class"] in wl["summary"]
    for cheaper in rec["rejected_cheaper"]:
        assert not cheaper["meets"] and cheaper["bottleneck"]
        assert cheaper["price_per_gpu_hour"] < chosen["price_per_gpu_hour"]
    # Cheapest first, as the recommendation compares prices: in whole cents, fewer GPUs first.
    prices = [(round(r["price_per_gpu_hour"], 2), r["gpu_count"]) for r in wl["catalog_rows"]
              if r["price_per_gpu_hour"] is not None]
    assert prices == sorted(prices) and len(wl["catalog_rows"]) == rec["considered_count"]
    assert all(r["gpu"] == "H100" for r in wl["catalog_rows"])
    assert {s["cloud"] for s in context["catalog"]["sources"]} >= {r["cloud"] for r in wl["catalog_rows"]}


def test_decode_modes_are_reported_apart():
    points = make_points() + make_points(decode="gpu", c=900.0, seed=5)
    ctx = build_context(points, gpu="H100")
    names = [w["workload"] for w in ctx["workloads"]]
    assert names == ["resnet50-train[decode=cpu]", "resnet50-train[decode=gpu]"]
    cpu, gpu = (w["knee"]["by_decode"] for w in ctx["workloads"])
    assert [k["decode"] for k in cpu] == ["cpu"] and [k["decode"] for k in gpu] == ["gpu"]
    assert cpu[0]["knee_vcpus"] == 12 and gpu[0]["knee_vcpus"] == 2  # 900/vCPU reaches 1140 at 2


def test_the_measured_knee_not_reached_says_how_close():
    points = make_points(vcpus=(1, 2, 4), noise=0.0)
    (knee,) = measured_knees(points, 1200.0, 0.05)
    assert knee.knee_vcpus is None and knee.best_vcpus == 4
    assert knee.best_fraction == pytest.approx(600 / 1.06 / 1200)


def test_the_measured_knee_names_the_ceiling_as_the_fit_does():
    points = make_points(vcpus=(1, 2, 4), noise=0.0)
    (measured,) = measured_knees(points, 500.0, 0.05, "GPU ceiling")
    (fitted,) = measured_knees(points, 500.0, 0.05)
    (none,) = measured_knees(points, None, 0.05)
    assert measured.ceiling_source == "the GPU ceiling" and fitted.ceiling_source == "the ceiling"
    assert none.ceiling_source == "best measured rate"


def test_host_without_gpu_is_an_illustration_against_a_labelled_target():
    small = make_points(G=60.0, c=25.0, b=0.03, profile="cpu-small", gpu_model="", vcpus=(1, 2), rams=(4.0,),
                        disks=("local-nvme", "standard"))
    ctx = build_context(small)
    assert ctx["target"]["gpu"] == "H100" and ctx["target"]["illustrative"] is True
    assert "default" in ctx["target"]["source"]
    assert ctx["profile"]["cpu_small_without_gpu"] is True and "cpu-small" in ctx["profile"]["note"]
    assert "do not size a real H100" in ctx["profile"]["note"]
    html = render_html(ctx)
    assert 'id="illustrative"' in html and "Illustration, not a sizing." in html
    other = build_context(small, gpu="A100")
    assert other["target"]["gpu"] != "H100" and other["target"]["illustrative"] is True


def test_no_instance_meets_the_bound_and_the_closest_is_shown():
    # 10 images/s per vCPU and strong contention: no H100 instance has enough vCPUs for a 1200 images/s GPU.
    starved = make_points(c=10.0, s=0.2, vcpus=(1, 2, 4, 8), noise=0.0)
    ctx = build_context(starved, gpu="H100")
    wl = _workload(ctx)
    rec = wl["recommendation"]
    assert rec["chosen"] is None and wl["no_recommendation"] == rec["reason"]
    assert rec["closest"]["bottleneck"] == "cpu" and rec["closest"]["fraction_of_ceiling"] < 0.95
    assert wl["summary"].startswith("No instance is recommended for resnet50-train")
    assert "none meets the bound; closest:" in render_html(ctx)


def test_quality_warnings_come_from_the_figures():
    clean = make_points(noise=0.0)
    assert quality_warnings(clean, None) == []
    busy = make_points(noise=0.0)
    def at(vcpus: int) -> int:
        return next(i for i, p in enumerate(busy) if p.vcpus == vcpus and p.ram_gib == 8 and p.disk_class == "ssd")

    one, two, other = at(1), at(2), at(4)
    busy[one] = dataclasses.replace(busy[one], status="noisy", spread=0.4)
    busy[other] = dataclasses.replace(busy[other], status="noisy", spread=0.1)
    busy[two] = dataclasses.replace(busy[two], throughput=0.5 * busy[one].throughput)  # more vCPUs, half the rate
    busy[0] = dataclasses.replace(busy[0], throughput=600.0)  # the GPU-alone point below the real pipeline's best
    warnings = quality_warnings(busy, None)
    assert len(warnings) == 3
    assert "2 of 37 points were flagged noisy" in warnings[0]
    assert "25% (median), up to 40% (at 1 vCPU" in warnings[0]
    assert "from 150 at 1 to 75 images/s at 2 vCPUs" in warnings[1]
    assert "GPU-alone point (600 images/s" in warnings[2]
    ctx = build_context(busy, gpu="H100")
    assert _workload(ctx)["warnings"][:3] == warnings
    html = render_html(ctx)
    assert 'id="quality"' in html and "Check the measurements" in html
    assert 'id="quality"' not in render_html(build_context(clean, gpu="H100"))


def test_bad_input_is_refused(points):
    with pytest.raises(SizerError, match="no points"):
        build_context([])
    with pytest.raises(SizerError, match="tolerance"):
        build_context(points, tolerance=0)
    with pytest.raises(SizerError, match="dataset size"):
        build_context(points, dataset_gib=-1)
    with pytest.raises(SizerError, match="no catalog row has GPU 'Z9000'"):
        build_context(points, gpu="Z9000")


# ------------------------------------------------------------------ from a store
def test_store_context_has_host_limits_and_calibration(tmp_path, points):
    path = store_with_points(tmp_path / "s.sqlite", points)
    with Store(path, create=False) as store:
        inputs = inputs_from_store(store)
    assert len(inputs["points"]) == len(points) and all(p.calibration_ips == 150.0 for p in inputs["points"])
    ctx = build_context(inputs["points"], sweeps=inputs["sweeps"], enforcement=inputs["enforcement"])
    (host,) = ctx["hosts"]
    assert host["cpu_model"] == "Test CPU 9000" and host["gpus"] == [H100] and host["limit_backend"] == "cgroup-v2"
    assert ctx["target"]["source"] == "measured host" and ctx["target"]["gpu"] == "H100"
    limits = ctx["limits"]
    assert limits["recorded"] and limits["backends"] == ["cgroup-v2"]
    assert sum(r["points"] for r in limits["rows"]) == len(points)
    assert limits["not_enforced"] == ["memory"]  # the GPU-alone point ran without a memory limit
    assert ctx["calibration"]["ips_per_vcpu"] == 150.0
    assert ctx["reproduce"]["sweep_commands"] == ["sizer sweep --workloads resnet50-train --vcpus 1,2,4"]


# ------------------------------------------------------------------ outputs
def test_write_outputs_round_trips(tmp_path, points):
    paths = write_outputs(points, tmp_path / "out", gpu="H100", command="sizer report")
    assert sorted(paths) == ["points.csv", "report.html", "results.json"]
    assert not list((tmp_path / "out").glob("*.tmp"))
    results = json.loads(paths["results.json"].read_text())
    assert results["schema_version"] == 1 and results["workloads"][0]["workload"] == "resnet50-train"
    again = read_points_csv(paths["points.csv"])
    assert [(p.vcpus, p.ram_gib, p.disk_class, p.throughput, p.input) for p in again] == [
        (p.vcpus, p.ram_gib, p.disk_class, p.throughput, p.input) for p in points
    ]


def test_html_is_self_contained_and_escaped(points):
    hostile = make_points(HOSTILE, unit="tokens/s", seed=2)
    ctx = build_context(points + hostile, gpu="H100")
    html = render_html(ctx)
    assert "<script" not in html.lower()
    assert "&lt;script&gt;alert(" in html or "&lt;script&gt;alert(&#39;x&#39;)" in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "@import" not in html and "url(http" not in html
    ids = re.findall(r'\bid="([^"]+)"', html)
    assert len(ids) == len(set(ids))  # inline SVGs must not share ids
    assert html.count('class="chart chart-vcpu"') == len(ctx["workloads"])  # one vCPU chart per workload
    assert "@media print" in html


def test_charts_have_titles_and_axis_labels_with_units(context):
    from sizer.report.charts import workload_charts

    charts = workload_charts(_workload(context), 0)
    assert [c["kind"] for c in charts] == ["vcpu", "ram", "fit"]
    for chart in charts:
        svg = chart["svg"]
        assert svg.startswith("<svg") and "<?xml" not in svg and "<metadata" not in svg
        texts = " ".join(re.findall(r"<text[^>]*>([^<]*)</text>", svg))
        assert "resnet50-train" in texts and "(images/s)" in texts
    assert "vCPUs" in charts[0]["svg"] and "RAM (GiB)" in charts[1]["svg"] and "measured" in charts[2]["svg"]


# ------------------------------------------------------------------ the command
def test_cli_report_from_points_file(tmp_path, points, cli):
    csv_path = tmp_path / "points.csv"
    write_points_csv(points, csv_path)
    out = tmp_path / "out"
    code, stdout, err = cli("report", "--input", csv_path, "--out", out, "--gpu", "H100", "--json")
    assert code == 0, err
    data = json.loads(stdout)
    assert data["schema_version"] == 1 and data["reproduce"]["command"].startswith("sizer report --input")
    assert (out / "report.html").stat().st_size > 10_000 and (out / "points.csv").exists()
    code, stdout, err = cli("report", "--input", csv_path, "--out", out, "--gpu", "H100")
    assert code == 0 and "resnet50-train" in stdout and "report.html" in stdout


def test_cli_report_from_store(tmp_path, points, cli):
    path = store_with_points(tmp_path / "s.sqlite", points)
    code, stdout, err = cli("report", "--store", path, "--out", tmp_path / "out", "--json")
    assert code == 0, err
    assert json.loads(stdout)["limits"]["recorded"] is True


def test_cli_report_bad_input_exits_2(tmp_path, points, cli):
    csv_path = tmp_path / "points.csv"
    write_points_csv(points, csv_path)
    for args, words in (
        (["--out", tmp_path], "--store"),
        (["--input", csv_path, "--store", tmp_path / "s", "--out", tmp_path], "not both"),
        (["--store", tmp_path / "missing.sqlite", "--out", tmp_path], "no store"),
        (["--input", csv_path, "--out", tmp_path, "--tolerance", "1.5"], "tolerance"),
    ):
        code, _, err = cli("report", *args)
        assert code == 2 and words in err and len(err.strip().splitlines()) == 1, err


def test_cli_report_cpu_cost_fits_without_the_hosts_fast_moment_and_shows_the_points_as_measured(tmp_path, cli):
    # A CPU-bound window: busy vCPUs over its CPU time per image.
    points = [dataclasses.replace(p, cpu_util_per_vcpu=0.98, cpu_ms_per_sample=p.vcpus * 0.98 * 1000.0 / p.throughput)
              if p.bottleneck == "cpu" else p for p in make_points(noise=0.0)]
    index = next(i for i, p in enumerate(points) if (p.vcpus, p.ram_gib, p.disk_class) == (4, 32.0, "ssd"))
    fast = points[index]
    assert fast.bottleneck == "cpu" and fast.cpu_ms_per_sample is not None
    # The shared host ran this window 30% faster: less CPU time per image.
    points[index] = fast = dataclasses.replace(fast, throughput=fast.throughput * 1.3,
                                               cpu_ms_per_sample=fast.cpu_ms_per_sample / 1.3)
    path = store_with_points(tmp_path / "s.sqlite", points)

    def fitted(*flags):
        code, stdout, err = cli("report", "--store", path, "--out", tmp_path / "out", "--json", *flags)
        assert code == 0, err
        data = json.loads(stdout)
        return data, _workload(data)

    _, as_measured = fitted()
    data, steady = fitted("--cpu-cost")
    assert as_measured["model"]["loo_max_ape"] > 0.2  # the fast moment, held out, is mispredicted
    assert steady["model"]["loo_max_ape"] < 0.02
    per_vcpu = {x["name"]: x["value"] for x in steady["model"]["params"]}["per_vcpu"]
    assert per_vcpu == pytest.approx(150.0, rel=0.02)
    assert any("--cpu-cost" in n and "scaled" in n for n in steady["model"]["notes"])
    assert not any("--cpu-cost" in n for n in as_measured["model"]["notes"])
    shown = {(p["vcpus"], p["ram_gib"], p["disk_class"]): p["measured"] for p in steady["points"]}
    assert shown[(4, 32.0, "ssd")] == pytest.approx(fast.throughput)  # the grid keeps the measurement
    assert data["cpu_cost"] is True and data["reproduce"]["command"].endswith("--cpu-cost")
    # Without the option the report says why it might be wanted; with it, it does not.
    (hint,) = [w for w in as_measured["warnings"] if "--cpu-cost" in w]
    assert "at 4 vCPUs" in hint and "30% apart" in hint
    assert not any("--cpu-cost" in w for w in steady["warnings"])
    # `sizer fit` and `sizer recommend` take the same option, through the same fit input.
    code, stdout, err = cli("fit", "--store", path, "--cpu-cost", "--json")
    assert code == 0, err
    (fitted,) = json.loads(stdout)["workloads"]
    assert fitted["loo_max_ape"] == pytest.approx(steady["model"]["loo_max_ape"])
    assert any("--cpu-cost" in n for n in fitted["notes"])
    code, stdout, err = cli("recommend", "--store", path, "--cpu-cost", "--json")
    assert code == 0 and json.loads(stdout)["recommendations"], err


def test_cpu_cost_hint_needs_windows_apart_at_one_vcpu_count():
    from sizer.points import Point

    def window(v, ms, util=0.97):
        return Point("w", v, 8.0, "ssd", 1000.0, "images/s", cpu_util_per_vcpu=util, cpu_ms_per_sample=ms)

    # 4.0 against 4.6 ms (15%) is within what one host's moments give; 2 and 8 vCPUs differ for real.
    steady = [window(4, 4.0), window(4, 4.6), window(2, 3.0), window(8, 6.0), window(4, 9.0, util=0.3)]
    assert not any("--cpu-cost" in w for w in quality_warnings(steady, None))
    moved = steady + [window(4, 3.2)]
    (hint,) = [w for w in quality_warnings(moved, None) if "--cpu-cost" in w]
    assert "at 4 vCPUs spent 3.20 to 4.60 ms" in hint
    assert not any("--cpu-cost" in w for w in quality_warnings(moved, None, cpu_cost=True))


def test_cli_report_cpu_cost_wants_a_store(tmp_path, points, cli):
    csv_path = tmp_path / "points.csv"
    write_points_csv(points, csv_path)
    code, _, err = cli("report", "--input", csv_path, "--out", tmp_path / "out", "--cpu-cost")
    assert code == 2 and "--store" in err and len(err.strip().splitlines()) == 1, err
    # A store written without the windows' CPU time is refused the same way, before any fit.
    path = store_with_points(tmp_path / "s.sqlite", points)
    code, _, err = cli("report", "--store", path, "--out", tmp_path / "out", "--cpu-cost")
    assert code == 2 and "CPU time per sample" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out" / "report.html").exists()


def test_out_of_memory_shapes_are_named_by_ram_and_fewest_vcpus():
    from sizer.points import Point

    def point(v, ram, status):
        return Point(workload="w", vcpus=v, ram_gib=ram, disk_class="ssd", throughput=0.0 if status == "oom" else 1.0,
                     unit="images/s", status=status)

    points = [point(16, 8.0, "oom"), point(12, 8.0, "oom"), point(8, 8.0, "ok"), point(16, 32.0, "ok"), point(4, 2.0, "oom")]
    assert out_of_memory(points) == [OutOfMemory(2.0, 4), OutOfMemory(8.0, 12)]
    assert out_of_memory([point(2, 8.0, "ok")]) == []


def test_the_busy_host_notice_needs_signs_of_the_host_not_of_the_model():
    """A card may warn that the model is rough or that CPU costs differ; only noisy points or rates
    that fall with more vCPUs raise the notice that the host was busy."""
    from sizer.points import Point

    def window(v, ms, ram=8.0):
        return Point("w", v, ram, "ssd", 250.0 * v, "images/s", cpu_util_per_vcpu=0.97, cpu_ms_per_sample=ms)

    costly = [window(2, 3.0), window(4, 3.0), window(4, 4.6, ram=16.0), window(8, 3.0)]
    ctx = build_context(costly, gpu="H100")
    assert any("--cpu-cost" in w for w in _workload(ctx, "w")["warnings"])
    assert 'id="quality"' not in render_html(ctx)
    noisy = [dataclasses.replace(p, status="noisy", spread=0.3) for p in (window(2, 3.0), window(4, 3.0))] + [
        window(8, 3.0)]
    assert 'id="quality"' in render_html(build_context(noisy, gpu="H100"))
