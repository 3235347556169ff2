"""Speed on GPUs not measured (sizer/model/gpu_speed.py) and the kernel classes it splits time
by (workloads/kernel_split.py), on GPUs and splits made here."""

from __future__ import annotations

import dataclasses

import pytest

from sizer.gpu_table import GpuSpec, GpuTable
from sizer.model import gpu_speed as gs
from sizer.model.types import Param, WorkloadFit
from workloads.kernel_split import MEMORY, OTHER, TENSOR, classify, split_kernels


def gpu(name: str, bandwidth: float = 2000.0, tflops: float = 300.0, sms: int = 100, clock: float = 1500.0) -> GpuSpec:
    return GpuSpec(gpu=name, memory_gib=40, memory_bandwidth_gbps=bandwidth, bf16_tensor_tflops=tflops,
                   fp16_tensor_tflops=tflops, tf32_tensor_tflops=tflops / 2, fp32_tflops=tflops / 16, sm_count=sms,
                   boost_clock_mhz=clock, form_factor="SXM", source="https://example.com", figures_read="")


SOURCE = gpu("SRC")
# Tensor operators on both sides of SOURCE's ridge point (300e12 / 2000e9 = 150 FLOP/byte).
OPS = {"tensor": [[2e9, 4e7], [6e9, 1e7]], "memory_bytes": 3e8, "precision": "bf16"}
RECORD = {"samples": 100.0, "tensor_s": 0.02, "memory_s": 0.05, "other_s": 0.01, "precision": "bf16", "op_costs": OPS}


def splits() -> list[gs.TimeSplit]:
    measured = gs.measured_split(RECORD, ceiling=1000.0, source=SOURCE)
    analytic, alternatives = gs.analytic_splits(OPS, SOURCE)
    no_ops = gs.measured_split({**RECORD, "op_costs": None}, ceiling=1000.0, source=SOURCE)
    return [measured, analytic, no_ops, *alternatives]


def test_a_measured_split_takes_kernel_time_past_the_roofline_as_other_and_idle_time_as_latency():
    split = gs.measured_split(RECORD, ceiling=1000.0, source=SOURCE)  # 1 ms a sample, 0.8 ms of kernels
    roof_memory = OPS["memory_bytes"] / 2000e9  # 0.15 ms of the 0.5 ms memory kernels took
    assert split.memory == pytest.approx(roof_memory / 1e-3)
    assert split.latency == pytest.approx(0.2)
    assert split.tensor + split.memory + split.other + split.latency == pytest.approx(1.0)
    whole = gs.measured_split({**RECORD, "op_costs": None}, ceiling=1000.0, source=SOURCE)
    assert (whole.tensor, whole.memory, whole.other) == pytest.approx((0.2, 0.5, 0.1))
    slower = gs.measured_split(RECORD, ceiling=2000.0, source=SOURCE)  # kernels longer than the ceiling's time
    assert slower.latency == 0.0


@pytest.mark.parametrize("index", range(5))
def test_on_the_source_gpu_the_prediction_is_the_measurement(index):
    split = splits()[index]
    p = gs.predict_ceiling(1000.0, split, SOURCE, dataclasses.replace(SOURCE, gpu="SAME"), low=980.0, high=1010.0)
    assert (p.value, p.low, p.high) == pytest.approx((1000.0, 980.0, 1010.0))


@pytest.mark.parametrize("field", ["memory_bandwidth_gbps", "bf16_tensor_tflops", "sm_count", "boost_clock_mhz"])
@pytest.mark.parametrize("index", range(5))
def test_the_prediction_never_falls_as_the_target_gets_faster(field, index):
    split = splits()[index]
    values = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0]
    predicted = []
    for factor in values:
        target = dataclasses.replace(SOURCE, gpu="T", **{field: type(getattr(SOURCE, field))(getattr(SOURCE, field) * factor)})
        p = gs.predict_ceiling(1000.0, split, SOURCE, target)
        assert p.low <= p.value <= p.high
        predicted.append((p.value, p.low, p.high))
    for before, after in zip(predicted, predicted[1:]):
        assert all(a >= b - 1e-9 for a, b in zip(after, before))
    if field == "memory_bandwidth_gbps":
        assert predicted[-1][0] > predicted[0][0]


def test_each_share_scales_with_its_own_figure():
    twice_bandwidth = dataclasses.replace(SOURCE, gpu="B", memory_bandwidth_gbps=4000.0)
    memory_only = gs.TimeSplit(gs.MEASURED, "bf16", 0.0, 1.0, 0.0, 0.0)
    latency_only = gs.TimeSplit(gs.MEASURED, "bf16", 0.0, 0.0, 0.0, 1.0)
    assert gs.predict_ceiling(1000.0, memory_only, SOURCE, twice_bandwidth).value == pytest.approx(2000.0)
    assert gs.predict_ceiling(1000.0, latency_only, SOURCE, twice_bandwidth).value == pytest.approx(1000.0)
    # Compute-bound operators (intensity 600 > ridge 150) move with the tensor rate, not the bandwidth.
    compute_bound = gs.TimeSplit(gs.MEASURED, "bf16", 1.0, 0.0, 0.0, 0.0, ((6e9, 1e7),))
    twice_tflops = dataclasses.replace(SOURCE, gpu="F", bf16_tensor_tflops=600.0)
    assert gs.predict_ceiling(1000.0, compute_bound, SOURCE, twice_tflops).value == pytest.approx(2000.0)
    assert gs.predict_ceiling(1000.0, compute_bound, SOURCE, twice_bandwidth).value == pytest.approx(1000.0)
    with pytest.raises(ValueError, match="sum to 1"):
        gs.TimeSplit(gs.MEASURED, "bf16", 0.5, 0.6, 0.0, 0.0)


def test_an_analytic_range_spans_the_kernels_efficiencies():
    target = gpu("T", bandwidth=900.0, tflops=125.0, sms=80)
    analytic, alternatives = gs.analytic_splits(OPS, SOURCE)
    alone = gs.predict_ceiling(1000.0, analytic, SOURCE, target)
    wide = gs.predict_ceiling(1000.0, analytic, SOURCE, target, alternatives=alternatives)
    assert wide.method == gs.ANALYTIC and wide.value == alone.value
    assert wide.low < alone.low or wide.high > alone.high
    measured = gs.predict_ceiling(1000.0, splits()[0], SOURCE, target)
    assert measured.low < measured.high and measured.low <= measured.value <= measured.high


def _fit() -> WorkloadFit:
    def param(name: str, value: float, source: str = "fit", low: float | None = None, high: float | None = None):
        return Param(name, value, low, high, "", source)

    params = {"gpu_ceiling": param("gpu_ceiling", 1000.0, "measured", 990.0, 1010.0), "per_vcpu": param("per_vcpu", 200.0),
              "usl_sigma": param("usl_sigma", 0.01), "usl_kappa": param("usl_kappa", 0.0),
              "bytes_per_sample": param("bytes_per_sample", 110e3), "footprint_gib": param("footprint_gib", 2.0)}
    return WorkloadFit("resnet50-train", "images/s", params, 10, 0.02, 0.05, [], 300.0, gpu_model="NVIDIA SRC 40GB",
                       gpu_memory_gib=40.0)


def test_fit_for_gpu_changes_only_the_ceiling():
    slow = gpu("SLOW", bandwidth=500.0, tflops=75.0, sms=40)
    table = GpuTable([SOURCE, slow])
    fit = _fit()
    out = gs.fit_for_gpu(fit, "SLOW", table, splits()[0])
    ceiling = out.params["gpu_ceiling"]
    assert ceiling.source == "predicted" and ceiling.value < 1000.0
    assert ceiling.low <= ceiling.value <= ceiling.high
    assert {k: v for k, v in out.params.items() if k != "gpu_ceiling"} == \
        {k: v for k, v in fit.params.items() if k != "gpu_ceiling"}
    assert fit.params["gpu_ceiling"].value == 1000.0 and fit.gpu_model == "NVIDIA SRC 40GB"  # the original is kept
    assert (out.gpu_model, out.gpu_memory_gib) == ("SLOW", 40)
    # The same per-vCPU rate feeds the slower ceiling: fewer vCPUs reach it.
    at_4 = out.predict(4, 64.0, None)
    assert at_4.terms["cpu"] == fit.predict(4, 64.0, None).terms["cpu"]
    assert out.predict(16, 64.0, None).throughput == pytest.approx(ceiling.value)


def test_the_split_is_read_from_the_ceiling_point_first():
    from sizer.points import Point

    def point(input_: str, record: dict | None, status: str = "ok") -> Point:
        return Point("w", 16, 32.0, "local-nvme", 1000.0, "images/s", status=status, input=input_,
                     kernel_split=record)

    other, ceiling = {"samples": 1.0, "tensor_s": 1.0}, {"samples": 2.0, "tensor_s": 1.0}
    assert gs.recorded_split([point("files", other), point("synthetic", ceiling)]) is ceiling
    assert gs.recorded_split([point("files", other), point("synthetic", ceiling, status="error")]) is other
    assert gs.recorded_split([point("synthetic", None)]) is None


def test_split_for_prefers_the_measured_split_and_needs_one_or_the_other():
    split, alternatives = gs.split_for(RECORD, 1000.0, SOURCE, analytic=lambda: OPS)
    assert split.method == gs.MEASURED and alternatives == []
    split, alternatives = gs.split_for(None, 1000.0, SOURCE, analytic=lambda: OPS)
    assert split.method == gs.ANALYTIC and len(alternatives) == 2
    with pytest.raises(ValueError):
        gs.split_for(None, 1000.0, SOURCE)


@pytest.mark.parametrize("name, expected", [
    ("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64", TENSOR),
    ("void cutlass__5x_cudnn::Kernel<cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_nhwc_align8>", TENSOR),
    ("nvjet_sm90_tst_256x128_64x4_1x2_h_ssched_bz_coopA_TNT", TENSOR),
    ("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x256_32x3_nt_align1>", TENSOR),
    ("void at::native::batch_norm_collect_statistics_channels_last_kernel<at::native::Var, c10::BFloat16>", MEMORY),
    ("void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>>", MEMORY),
    ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda>", MEMORY),
    ("void elemWiseRNNcell<float, float, float, (cudnnRNNMode_t)2>", MEMORY),
    ("Memset (Device)", MEMORY),
    ("void at::native::(anonymous namespace)::convert_kernel<float>", MEMORY),
    ("void RNN_blockPersist_fp_LSTM<float, float, float>", OTHER),
])
def test_kernels_are_classed_by_name(name, expected):
    assert classify(name) == expected


def test_kernel_seconds_add_up_by_class():
    record = split_kernels([("sm90_xmma_gemm", 0.002), ("vectorized_elementwise_kernel", 0.003),
                            ("sm90_xmma_gemm", 0.001), ("mystery", 0.0005)])
    assert (record["tensor_s"], record["memory_s"], record["other_s"]) == pytest.approx((0.003, 0.003, 0.0005))
    assert record["busy_s"] == pytest.approx(0.0065) and record["kernels"] == 4
    assert record["top"][0][:2] == ["sm90_xmma_gemm", TENSOR]
