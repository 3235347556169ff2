"""The loader-variants script's bracketed comparison: each pipeline point against the calibrations
measured right before and after it, at its own vCPU count."""

import json


def _row(variant, vcpus, figure, loader_ms=None):
    return {"variant": variant, "vcpus": vcpus, "figure": figure, "loader_cpu_ms_per_sample": loader_ms}


def test_bracket_is_the_mean_of_the_neighbouring_calibrations(benchmark):
    lv = benchmark("loader_variants")
    rows = [_row("calib", 4, 300.0), _row("default", 4, 1080.0, loader_ms=3.5), _row("calib", 4, 360.0),
            _row("calib", 8, 350.0), _row("default", 8, 2520.0)]
    pairs = lv.bracketed_pairs(rows)
    assert [(p["vcpus"], p["variant"]) for p in pairs] == [(4, "default"), (8, "default")]
    first, second = pairs
    assert first["calib"] == 330.0
    assert abs(first["ratio"] - 1080.0 / (4 * 330.0)) < 1e-12
    assert abs(first["workers_over_calib"] - 3.5 * 330.0 / 1000) < 1e-12
    # Only the calibration before it is at its vCPU count: that one alone.
    assert second["calib"] == 350.0 and second["workers_over_calib"] is None


def test_decoding_is_compared_with_the_brackets_own_decoding(benchmark):
    lv = benchmark("loader_variants")
    rows = [_row("calib", 4, 300.0), _row("default", 4, 1080.0, loader_ms=3.5), _row("calib", 4, 360.0),
            _row("calib", 8, 350.0), _row("default", 8, 2520.0)]
    rows[0]["decode_cpu_ms_per_image"], rows[2]["decode_cpu_ms_per_image"] = 3.0, 3.4
    rows[1]["decode_cpu_ms_per_image"] = 3.52
    rows[4]["decode_cpu_ms_per_image"] = 3.0  # its one calibration has no decoding figure
    first, second = lv.bracketed_pairs(rows)
    assert abs(first["decode_over_calib"] - 3.52 / 3.2) < 1e-12
    assert second["decode_over_calib"] is None


def test_a_calibration_at_another_vcpu_count_is_no_bracket(benchmark):
    lv = benchmark("loader_variants")
    rows = [_row("calib", 2, 380.0), _row("default", 4, 1100.0), _row("calib", 8, 350.0)]
    assert lv.bracketed_pairs(rows) == []


def test_from_file_prints_the_brackets_without_measuring(benchmark, tmp_path, capsys):
    lv = benchmark("loader_variants")
    saved = tmp_path / "run.json"
    rows = [_row("calib", 2, 350.0), _row("default", 2, 630.0, loader_ms=2.9), _row("calib", 2, 350.0)]
    for r in rows:
        r.update(cpu_ms_per_sample=3.0, main_thread_cores=0.05, main_other_threads_cores=0.1,
                 cpu_system_share=0.02, involuntary_switches_per_s=300.0, minor_faults_per_sample=12.0)
    saved.write_text(json.dumps({"rows": rows}))
    assert lv.main(["--from", str(saved)]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.split()[:3] == ["2", "default", "1"])
    assert "0.90" in line  # 630 / (2 x 350)
    assert lv.main(["--from", str(tmp_path / "missing.json")]) == 2


def test_a_run_cut_short_keeps_the_points_it_measured(benchmark, tmp_path, monkeypatch):
    lv = benchmark("loader_variants")
    figures = iter([350.0, 630.0])

    def measure(variant, vcpus, args):
        figure = next(figures, None)
        if figure is None:
            raise KeyboardInterrupt  # the lease ends during the third point
        return {**_row(variant, vcpus, figure, loader_ms=2.9), "status": "ok", "enforced": f"cpuset 0-{vcpus - 1}"}

    monkeypatch.setattr(lv, "run_point", measure)
    out = tmp_path / "run.json"
    try:
        lv.main(["--vcpus", "2", "--variants", "calib,default,calib", "--out", str(out)])
    except KeyboardInterrupt:
        pass
    saved = json.loads(out.read_text())
    assert [(r["variant"], r["figure"]) for r in saved["rows"]] == [("calib", 350.0), ("default", 630.0)]
    assert saved["bracketed"][0]["ratio"] == 630.0 / (2 * 350.0)
    assert not list(tmp_path.glob("*.partial"))
