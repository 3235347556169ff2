"""Where a GPU step's time goes: a few steps under torch.profiler, each kernel's time classed by its
name as tensor-core work (matrix products and convolutions: cuBLAS, cuDNN, CUTLASS kernels), as
memory-bound work (elementwise, reductions, normalisation, copies, optimizer updates) or as
neither, plus the operator costs of one step (workloads.op_costs), whose intensities say how far
the tensor-core work leans on compute or on memory bandwidth.

A GPU-ceiling point records the result as its counter `gpu_kernel_split` (see `measure_split`);
sizer.model.gpu_speed scales each share to another GPU. The steps run after the point's measured
window, so profiling costs the figure nothing. torch is imported inside functions.
"""

from __future__ import annotations

import re
import time
from typing import Any, Callable

TENSOR, MEMORY, OTHER = "tensor", "memory", "other"
CLASSES = (TENSOR, MEMORY, OTHER)
PROFILED_STEPS = 5
TOP_KERNELS = 12  # the longest kernels kept by name in the record, for reading it

# Names of matrix-product and convolution kernels: cuBLAS and cuDNN (xmma, sm80_/sm90_ prefixes,
# implicit GEMM, fprop/dgrad/wgrad), CUTLASS, Hopper's wgmma, and the older hmma/s1688 families.
# "conv" followed by "ert" is a dtype conversion, not a convolution.
_TENSOR = re.compile(
    r"gemm|xmma|cutlass|wgmma|hmma|tensorop|s16816|s1688|h16816|h1688|h884|winograd|fprop|dgrad|wgrad"
    r"|conv(?!ert)|(^|_)sm\d\d+_",
    re.IGNORECASE,
)
# Kernels that stream memory: elementwise and vectorized maps, reductions, batch and layer norm,
# copies and layout changes, softmax and losses, pooling, dropout, optimizer updates, embeddings.
_MEMORY = re.compile(
    r"elementwise|elemwise|vectorized|reduce|norm|bn_|copy|memcpy|memset|transpose|nchwtonhwc|nhwctonchw"
    r"|cat_?array|index|gather|scatter|softmax|cross_?entropy|nll_?loss|dropout|pool|relu|sgd|adam"
    r"|foreach|multi_?tensor|embedding|fill|convert|cast",
    re.IGNORECASE,
)


def classify(kernel_name: str) -> str:
    """A kernel's class from its name: TENSOR, MEMORY or OTHER. Tensor patterns are tried first, so
    a GEMM with a fused ReLU epilogue stays a GEMM."""
    if _TENSOR.search(kernel_name):
        return TENSOR
    if _MEMORY.search(kernel_name):
        return MEMORY
    return OTHER


def split_kernels(kernels: list[tuple[str, float]]) -> dict[str, Any]:
    """Seconds per class of (name, seconds) kernel records, and the longest kernels by name."""
    seconds = {c: 0.0 for c in CLASSES}
    by_name: dict[str, float] = {}
    for name, secs in kernels:
        seconds[classify(name)] += secs
        by_name[name] = by_name.get(name, 0.0) + secs
    top = sorted(by_name.items(), key=lambda kv: -kv[1])[:TOP_KERNELS]
    return {
        **{f"{c}_s": seconds[c] for c in CLASSES},
        "busy_s": sum(seconds.values()),
        "kernels": len(kernels),
        "top": [[name[:120], classify(name), round(secs, 6)] for name, secs in top],
    }


def _device_kernels(prof: Any) -> list[tuple[str, float]]:
    """(name, seconds) of every device-side event (kernels, copies, memsets) the profiler saw."""
    from torch.autograd import DeviceType

    out = []
    for event in prof.events():
        if getattr(event, "device_type", None) != DeviceType.CUDA:
            continue
        elapsed_us = event.time_range.end - event.time_range.start
        if elapsed_us > 0:
            out.append((str(event.name), elapsed_us / 1e6))
    return out


def profile_steps(run_step: Callable[[], Any], samples_per_step: float, steps: int = PROFILED_STEPS) -> dict[str, Any]:
    """Kernel seconds per class over `steps` calls of `run_step` on the GPU, after one call outside
    the profile (nothing first-time inside it); with the steps' wall time and samples."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    run_step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        for _ in range(steps):
            run_step()
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
    record = split_kernels(_device_kernels(prof))
    record.update(steps=steps, samples=samples_per_step * steps, wall_s=wall)
    return record


def measure_split(run_step: Callable[[], Any], samples_per_step: float, precision: str) -> dict[str, Any]:
    """The counter `gpu_kernel_split` of a GPU-ceiling point: kernel seconds per class over a few
    profiled steps, and the operator costs per sample of one step (`op_costs`). `precision` is the
    step's arithmetic ("bf16" or "fp32"), the tensor-core rate its matrix work runs at."""
    from workloads.op_costs import trace_costs

    record = profile_steps(run_step, samples_per_step)
    record["method"] = "profiler"
    record["precision"] = precision
    record["op_costs"] = trace_costs(run_step).per_sample(samples_per_step)
    return record


def record_split(counters: dict[str, Any], run_step: Callable[[], Any], samples_per_step: float, precision: str) -> None:
    """Add `gpu_kernel_split` to a point's counters; a profiler that fails (no CUPTI) records why
    instead of failing a point whose figure is already measured."""
    try:
        counters["gpu_kernel_split"] = measure_split(run_step, samples_per_step, precision)
    except Exception as exc:  # the figure stands without its split
        counters["gpu_kernel_split_error"] = f"{type(exc).__name__}: {exc}"[:300]
