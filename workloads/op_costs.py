"""What a step's operators cost: each ATen operator's floating-point operations and the bytes it
reads and writes, counted as the step runs (on a GPU, on the CPU or on fake tensors).

FLOPs come from PyTorch's own formulas (`torch.utils.flop_counter`, the table FlopCounterMode
counts with: matrix products, convolutions and attention, forward and backward). Bytes are each
operator's distinct tensor inputs and outputs, as an unfused operator moves them through memory.
An operator with FLOPs runs on the tensor cores (or the FP32 units where a GPU has none); its
arithmetic intensity (FLOPs per byte) against a GPU's ridge point says how far its time leans on
compute or on memory bandwidth (sizer.model.gpu_speed). Every other operator only moves memory.

Tensor operators are kept per power-of-two intensity bin, so a record stays small whatever the
model. torch is imported inside functions: importing this module needs no framework.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass
class OpCosts:
    """One step's operator costs: tensor operators binned by log2 intensity ({bin: [flops, bytes]}),
    the bytes every other operator moves, and how many operators of each kind ran."""

    tensor_bins: dict[int, list[float]] = field(default_factory=dict)
    memory_bytes: float = 0.0
    tensor_ops: int = 0
    memory_ops: int = 0

    @property
    def tensor_flops(self) -> float:
        return sum(f for f, _ in self.tensor_bins.values())

    @property
    def tensor_bytes(self) -> float:
        return sum(b for _, b in self.tensor_bins.values())

    def add(self, flops: float, nbytes: float) -> None:
        if flops > 0:
            intensity = flops / max(nbytes, 1.0)
            key = int(math.floor(math.log2(max(intensity, 2.0**-20))))
            bin_ = self.tensor_bins.setdefault(key, [0.0, 0.0])
            bin_[0] += flops
            bin_[1] += nbytes
            self.tensor_ops += 1
        elif nbytes > 0:
            self.memory_bytes += nbytes
            self.memory_ops += 1

    def per_sample(self, samples: float) -> dict[str, Any]:
        """A plain, JSON-ready record per sample: {"tensor": [[flops, bytes], ...] by rising
        intensity, "memory_bytes", "tensor_ops", "memory_ops"}."""
        if samples <= 0:
            raise ValueError("samples must be > 0")
        return {
            "tensor": [[f / samples, b / samples] for _, (f, b) in sorted(self.tensor_bins.items())],
            "memory_bytes": self.memory_bytes / samples,
            "tensor_ops": self.tensor_ops,
            "memory_ops": self.memory_ops,
        }


def _tensor_bytes(values: Any, seen: set[int]) -> float:
    """Bytes of the distinct tensors among `values` (nested lists and tuples too); a tensor met
    before (`seen`, by id) is not counted again."""
    import torch

    total = 0.0
    stack = [values]
    while stack:
        value = stack.pop()
        if isinstance(value, torch.Tensor):
            if id(value) not in seen:
                seen.add(id(value))
                total += value.numel() * value.element_size()
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
        elif isinstance(value, dict):
            stack.extend(value.values())
    return total


def _weights_numel(value: Any) -> int:
    """Elements of the 2-D tensors (weight matrices) in `value`, a tensor or a list of them."""
    items = value if isinstance(value, (list, tuple)) else [value]
    return sum(t.numel() for t in items if getattr(t, "dim", lambda: 0)() == 2)


def rnn_flops(op_name: str, args: tuple) -> float:
    """FLOPs of a fused recurrent layer (cuDNN's `_cudnn_rnn`, oneDNN's `mkldnn_rnn_layer`), which
    PyTorch's formulas leave out: 2 per weight and time step and sample forward, twice that
    backward (input and weight gradients). 0 for any other operator."""
    if "rnn" not in op_name or not args:
        return 0.0
    if "mkldnn_rnn_layer" in op_name:
        weights = _weights_numel([args[1], args[2]])
    elif "_cudnn_rnn" in op_name:
        weights = _weights_numel(args[1])
    else:
        return 0.0
    shape = args[0].shape  # (time, batch, features) or (batch, time, features)
    tokens = shape[0] * shape[1] if len(shape) == 3 else shape[0]
    return float((4 if "backward" in op_name else 2) * tokens * weights)


def _cost_mode(costs: OpCosts):
    """A dispatch mode that adds each operator's FLOPs and bytes to `costs` as it runs."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    # Operators that only describe tensors (views, shapes, metadata) move no memory.
    no_traffic = {torch.ops.aten.view, torch.ops.aten._unsafe_view, torch.ops.aten.t, torch.ops.aten.transpose,
                  torch.ops.aten.permute, torch.ops.aten.expand, torch.ops.aten.alias, torch.ops.aten.detach,
                  torch.ops.aten.as_strided, torch.ops.aten.reshape, torch.ops.aten.squeeze,
                  torch.ops.aten.unsqueeze, torch.ops.aten.slice, torch.ops.aten.select, torch.ops.aten.split,
                  torch.ops.aten.split_with_sizes, torch.ops.aten.empty, torch.ops.aten.empty_like,
                  torch.ops.aten.empty_strided, torch.ops.prim.device}

    class CostMode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            packet = func._overloadpacket
            formula = flop_registry.get(packet)
            if formula is None and packet not in no_traffic:
                # A composite operator (conv2d, linear, batch_norm under inference_mode) is counted
                # through the operators it is made of, which come back through this mode.
                with self:
                    decomposed = func.decompose(*args, **kwargs)
                if decomposed is not NotImplemented:
                    return decomposed
            out = func(*args, **kwargs)
            if packet in no_traffic:
                return out
            if formula is not None:
                flops = float(formula(*args, **kwargs, out_val=out))
            else:
                flops = rnn_flops(str(func), args)
            seen: set[int] = set()
            nbytes = _tensor_bytes(args, seen) + _tensor_bytes(kwargs, seen) + _tensor_bytes(out, seen)
            costs.add(flops, nbytes)
            return out

    return CostMode()


def trace_costs(run_step: Callable[[], Any]) -> OpCosts:
    """The operator costs of one call of `run_step` (a training or inference step)."""
    costs = OpCosts()
    with _cost_mode(costs):
        run_step()
    return costs
