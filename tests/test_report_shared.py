"""The report's shared option on constructed points: two workloads sized alone (`make_points`) and
measured as a pair on one GPU; the shared instance priced per job against each one's own pick, cheaper
where the slowdowns leave it so, and the reason where it is not."""

from __future__ import annotations

import json

import pytest
from test_report_fixtures import H100, make_points

from sizer.points import Point
from sizer.report import build_context, render_html

SHARE = "16vcpu-64gib-local-nvme/time"
RATES = {"train-a": 1200.0, "lstm-b": 2000.0}  # each one's ceiling: its rate alone on a half that feeds it


def half_point(job: str, rate: float, partner: str = "", *, mem: float = 20.0, gpu: float = 60.0) -> Point:
    return Point(workload=job, vcpus=8, ram_gib=32.0, disk_class="local-nvme", throughput=rate,
                 unit="tokens/s" if job == "lstm-b" else "images/s", profile="gpu", gpu_util_pct=gpu,
                 cpu_util_per_vcpu=0.4, gpu_mem_peak_gib=mem, gpu_model=H100, input="files", decode="cpu",
                 job=job, partner=partner, share_of=SHARE)


def pair(r_a: float, r_b: float, *, mem: float = 20.0) -> list[Point]:
    a, b = "lstm-b", "train-a"
    return [half_point(a, RATES[a], mem=mem), half_point(b, RATES[b], mem=mem),
            half_point(a, RATES[a] / r_a, b, mem=mem), half_point(b, RATES[b] / r_b, a, mem=mem)]


def sized() -> list[Point]:
    return make_points("train-a", G=RATES["train-a"]) + make_points("lstm-b", c=900.0, G=RATES["lstm-b"], seed=3,
                                                                      unit="tokens/s")


def shared_of(points: list[Point]) -> dict:
    ctx = build_context(points, gpu="H100")
    assert json.loads(json.dumps(ctx)) == ctx
    return ctx


def test_a_pair_that_slows_little_is_cheaper_shared_priced_per_job_with_the_slowdown_in_it():
    ctx = shared_of(sized() + pair(1.25, 1.4))
    (entry,) = ctx["shared"]["pairs"]
    option = entry["option"]
    assert entry["r_ab"] == 1.25 and entry["r_ba"] == 1.4 and entry["shared_faster"] is True
    price = option["instance"]["price_per_gpu_hour"]
    assert option["instance"]["gpu_memory_gib"] >= 40 and option["gpu_memory_needed_gib"] == 40
    picks = {w["workload"]: w["recommendation"]["chosen"] for w in ctx["workloads"]}
    for job in option["jobs"]:
        rate = job["rate_shared"]
        assert job["cost_per_million_shared"] == pytest.approx(0.5 * price / (rate * 3600) * 1e6, rel=1e-3)
        assert job["own"]["cost_per_million"] == picks[job["job"]]["cost_per_million"]
    assert option["cost_per_million_shared"] < option["cost_per_million_own"]
    assert option["cheaper"] is True and option["why_not"] is None and ctx["shared"]["cheaper"] == [entry["key"]]
    html = render_html(ctx)
    assert 'id="shared"' in html and "half per job" in html and "<strong>yes</strong>" in html


def test_a_pair_that_slows_too_much_is_not_cheaper_and_says_by_how_much():
    ctx = shared_of(sized() + pair(2.4, 2.6))
    option = ctx["shared"]["pairs"][0]["option"]
    assert option["cheaper"] is False and option["cost_per_million_shared"] > option["cost_per_million_own"]
    why = option["why_not"]
    assert why.startswith("sharing slows the jobs more than half the price saves")
    assert "lstm-b 2.40x slower" in why and "train-a 2.60x slower" in why
    assert "ends later than one after the other" in why  # 1/2.4 + 1/2.6 < 1
    assert "no: sharing slows" in render_html(ctx)


def test_jobs_that_do_not_fit_one_gpus_memory_together_get_no_shared_instance():
    ctx = shared_of(sized() + pair(1.1, 1.1, mem=50.0))
    option = ctx["shared"]["pairs"][0]["option"]
    assert option["instance"] is None and option["cheaper"] is None
    assert "100 GiB of GPU memory together" in option["why_not"] and "do not fit one GPU's memory" in option["why_not"]


def test_a_job_without_a_pick_of_its_own_has_nothing_to_compare_with():
    points = make_points("train-a", G=RATES["train-a"]) + pair(1.1, 1.1)  # lstm-b was never sized alone
    option = shared_of(points)["shared"]["pairs"][0]["option"]
    assert option["cheaper"] is None and "lstm-b has no pick of its own" in option["why_not"]


def test_pairs_not_measured_are_predicted_with_a_range_and_no_price():
    third = [half_point("infer-c", 3000.0, gpu=30.0)]
    ctx = shared_of(sized() + pair(1.25, 1.4) + third)
    predicted = {tuple(p["jobs"]): p for p in ctx["shared"]["predicted"]}
    assert ("lstm-b", "train-a") not in predicted  # measured: priced, not predicted
    guess = predicted[("infer-c", "train-a")]
    assert guess["r_ab_range"][0] <= guess["r_ab"] <= guess["r_ab_range"][1]
    assert guess["shared_faster"] in ("yes", "no", "open") and "price" not in json.dumps(guess)
    assert ctx["shared"]["models"][0]["pairs"] == 1


def test_a_sweep_without_pairs_has_no_shared_option():
    assert build_context(sized(), gpu="H100")["shared"] is None
