"""The analytic GPU memory estimate (workloads/memory_estimate.py) and operator costs
(workloads/op_costs.py, workloads/fake_step.py) on small torchvision models, on this CPU."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

from workloads.fake_step import analytic_costs, build, workload_kind  # noqa: E402
from workloads.memory_estimate import BLOCK, WORKSPACE_BYTES, allocated_size, estimate  # noqa: E402

SMALL = {"model": "resnet18", "image_size": 64}


def test_the_estimate_grows_with_the_batch_and_adds_up():
    small, large = estimate("resnet50-train", 32, SMALL), estimate("resnet50-train", 64, SMALL)
    assert 0 < small.peak_bytes < large.peak_bytes
    assert large.at_peak["activations"] > small.at_peak["activations"] > 0
    for e in (small, large):
        assert sum(e.at_peak.values()) == e.tensor_peak_bytes
        assert e.peak_bytes == e.tensor_peak_bytes + e.workspace_bytes
        assert e.workspace_bytes == 3 * WORKSPACE_BYTES  # matrix products forward and backward
    params = sum(p.numel() * 4 for p in __import__("torchvision").models.resnet18(num_classes=1000).parameters())
    # Weights, their gradients and SGD's momentum: fp32, one of each per parameter (bn buffers beside).
    assert small.persistent["gradients"] == small.persistent["optimizer"] == pytest.approx(params, rel=0.01)
    assert small.persistent["parameters"] >= params
    assert small.precision == "bf16" and large.batch_size == 64


def test_inference_holds_no_gradients_and_less_than_training():
    infer, train = estimate("resnet50-infer", 8, SMALL), estimate("resnet50-train", 8, SMALL)
    assert infer.persistent["gradients"] == infer.persistent["optimizer"] == 0
    assert infer.workspace_bytes == WORKSPACE_BYTES
    assert 0 < infer.peak_bytes < train.peak_bytes


def test_allocations_round_up_to_the_allocators_block():
    assert allocated_size(1) == BLOCK and allocated_size(BLOCK) == BLOCK and allocated_size(BLOCK + 1) == 2 * BLOCK
    assert allocated_size(0) == 0


def test_operator_flops_match_flop_counter_mode():
    from torch.utils.flop_counter import FlopCounterMode

    from workloads.op_costs import trace_costs

    mode, step = build("resnet50-train", 4, SMALL)
    with mode:
        step.run()  # the optimizer's state first, as analytic_costs does
        with FlopCounterMode(display=False) as counter:
            step.run()
        costs = trace_costs(step.run)
    assert costs.tensor_flops == pytest.approx(counter.get_total_flops())
    record = analytic_costs("resnet50-train", 4, SMALL)
    assert sum(f for f, _ in record["tensor"]) * 4 == pytest.approx(counter.get_total_flops())
    assert record["memory_bytes"] > 0 and record["precision"] == "bf16"
    intensities = [f / b for f, b in record["tensor"]]
    assert intensities == sorted(intensities)


def test_the_lstm_counts_its_recurrent_layers():
    record = analytic_costs("ptb-lstm-train", 4)
    # 2 layers of 4 gates over 650 + 650 inputs, forward and twice that backward, plus the decoder.
    lstm = 2 * 2 * 4 * 650 * 1300
    assert sum(f for f, _ in record["tensor"]) > 3 * lstm


def test_only_built_in_gpu_workloads_have_a_fake_step():
    assert workload_kind("vgg16-infer") == "infer"
    assert workload_kind("ptb-lstm-train") == "lstm"
    with pytest.raises(ValueError, match="no fake step"):
        workload_kind("imagenet-preprocess")
    with pytest.raises(ValueError, match="batch size"):
        build("resnet50-train", 0, SMALL)
