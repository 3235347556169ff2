"""A built-in workload's peak GPU memory at a batch size, estimated with no GPU.

One step of the workload runs on fake tensors (workloads.fake_step: the workload's own model,
precision, memory format and optimizer) while a dispatch mode follows every tensor storage from
the operator that makes it until it is freed, as the GPU's caching allocator would hold it
(sizes rounded up to its 512-byte blocks). The peak over three steps (the optimizer's state exists
from the first; a CNN step's forward pass runs while the last step's gradients are still held) is
the estimate, taken apart at the peak into:

- parameters (and buffers) and the input batch, made before the step;
- gradients and the optimizer's state (momentum), as they are once the step is done;
- activations: what the forward pass saved for the backward one (saved-tensor hooks), including
  the bf16 copies of the weights autocast makes;
- temporaries: everything else alive at that moment.

Beside the tensors, the matrix-product libraries hold workspaces from the same allocator: one
per cuBLAS or cuBLASLt handle, 32 MiB each from Hopper on (NVIDIA's recommendation, which PyTorch
follows; 4 MiB before). A step that runs matrix products in its forward pass holds one, one with
matrix products in its backward pass (run on autograd's own thread) two more: on an H200, training
steps held 92-98 MiB beyond their tensors at every batch size, inference 35 MiB. The estimate adds
them at the Hopper size (`workspace_bytes`), the larger. What it still cannot see: cuDNN's
per-call workspaces, which its heuristics size per layer and batch (AlexNet's 11x11 first
convolution took 119 MiB more with cuDNN than without at batch 256, where the step's peak is:
inference 20% over the estimate there), and the CUDA context; `sizer gpumem` measures both. Runs
on the CPU in seconds; torch is imported inside functions.
"""

from __future__ import annotations

import functools
import math
import weakref
from dataclasses import asdict, dataclass, field
from typing import Any

from workloads.fake_step import FakeStep, build

BLOCK = 512  # the CUDA caching allocator's smallest block: every allocation is a multiple of it
WORKSPACE_BYTES = 32 * 2**20  # one cuBLAS/cuBLASLt handle's workspace from Hopper on
WORKSPACES = {"forward": 1, "backward": 2}  # handles a pass with matrix products holds
CATEGORIES = ("parameters", "inputs", "gradients", "optimizer", "activations", "temporaries")
STEPS = 3


def allocated_size(nbytes: int) -> int:
    """Bytes the caching allocator hands out for a request of `nbytes` (a multiple of its block)."""
    return int(math.ceil(max(nbytes, 1) / BLOCK) * BLOCK) if nbytes > 0 else 0


@dataclass
class MemoryEstimate:
    workload: str
    batch_size: int
    precision: str
    peak_bytes: int  # tensors and library workspaces
    tensor_peak_bytes: int
    workspace_bytes: int
    at_peak: dict[str, int] = field(default_factory=dict)  # category -> bytes live at the peak
    persistent: dict[str, int] = field(default_factory=dict)  # parameters, inputs, gradients, optimizer
    method: str = "fake tensors"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Live:
    """The storages alive now (by id: their allocated bytes and what made them), and the bytes
    alive at the peak by what made them (activations: made by the forward pass and saved for the
    backward one)."""

    def __init__(self) -> None:
        self.sizes: dict[int, int] = {}
        self.tags: dict[int, str] = {}
        self.refs: dict[int, Any] = {}
        self.saved: set[int] = set()
        self.matmul_phases: set[str] = set()  # the passes that ran matrix products
        self.current = 0
        self.peak = 0
        self.at_peak: dict[str, int] = {}

    def add(self, tensor: Any, tag: str) -> None:
        storage = tensor.untyped_storage()  # one Python object per storage while it lives
        key = id(storage)
        if key in self.sizes:
            return
        size = allocated_size(int(storage.nbytes()))
        self.sizes[key], self.tags[key] = size, tag
        self.refs[key] = weakref.ref(storage, functools.partial(self._freed, key))
        self.current += size
        if self.current > self.peak:
            self.peak = self.current
            self._snapshot()

    def _snapshot(self) -> None:
        out = dict.fromkeys(CATEGORIES, 0)
        for key, size in self.sizes.items():
            tag = self.tags[key]
            if tag == "forward":
                tag = "activations" if key in self.saved else "temporaries"
            elif tag == "backward":
                tag = "gradients"  # alive outside backward: the gradients it left
            out[tag] += size
        self.at_peak = out

    def _freed(self, key: int, _ref: Any = None) -> None:
        self.refs.pop(key, None)
        self.tags.pop(key, None)
        self.saved.discard(key)
        self.current -= self.sizes.pop(key, 0)


class _Phase:
    """Which part of the step is running: the optimizer's step (its hooks say), the backward pass
    (autograd's graph task), else the forward pass."""

    def __init__(self, optimizer: Any):
        self.in_optimizer = False
        if optimizer is not None:
            optimizer.register_step_pre_hook(lambda *_: self._set(True))
            optimizer.register_step_post_hook(lambda *_: self._set(False))

    def _set(self, value: bool) -> None:
        self.in_optimizer = value

    def now(self) -> str:
        import torch

        if self.in_optimizer:
            return "optimizer"
        return "backward" if torch._C._current_graph_task_id() != -1 else "forward"


def _tracking_mode(live: _Live, phase: _Phase):
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten
    from torch.utils.flop_counter import flop_registry

    from workloads.op_costs import rnn_flops

    class Track(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func._overloadpacket not in flop_registry and func is not torch.ops.prim.device.default:
                with self:  # a composite (linear under inference_mode) is followed through its parts
                    decomposed = func.decompose(*args, **kwargs)
                if decomposed is not NotImplemented:
                    return decomposed
            out = func(*args, **kwargs)
            tag = phase.now()
            if func._overloadpacket in flop_registry or rnn_flops(str(func), args) > 0:
                live.matmul_phases.add(tag)
            for value in tree_flatten(out)[0]:
                if isinstance(value, torch.Tensor):
                    live.add(value, tag)
            return out

    return Track()


def _run(step: FakeStep, live: _Live) -> None:
    """Run the step STEPS times under tracking, marking what the forward pass saves for backward."""
    import torch

    phase = _Phase(step.optimizer)

    def pack(t: Any) -> Any:
        live.saved.add(id(t.untyped_storage()))
        return t

    for _ in range(STEPS):
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), _tracking_mode(live, phase):
            step.run()


def estimate(name: str, batch_size: int | None = None, overrides: dict[str, Any] | None = None) -> MemoryEstimate:
    """The peak GPU memory of one step of built-in workload `name` at `batch_size` (default its
    own), with what is live at the peak by category."""
    mode, step = build(name, batch_size, overrides)
    with mode:
        live = _Live()
        for t in step.params:
            live.add(t, "parameters")
        for t in step.inputs:
            live.add(t, "inputs")
        _run(step, live)
        persistent = dict.fromkeys(("parameters", "inputs", "gradients", "optimizer"), 0)
        for key, size in live.sizes.items():
            tag = {"backward": "gradients"}.get(live.tags[key], live.tags[key])
            if tag in persistent:
                persistent[tag] += size
    workspace = WORKSPACE_BYTES * sum(WORKSPACES.get(p, 0) for p in live.matmul_phases)
    return MemoryEstimate(workload=name, batch_size=int(step.config["batch_size"]),
                          precision=str(step.config.get("precision", "fp32")), peak_bytes=int(live.peak) + workspace,
                          tensor_peak_bytes=int(live.peak), workspace_bytes=workspace,
                          at_peak=dict(live.at_peak), persistent=persistent)
