"""One step of a built-in GPU workload on fake tensors: the same model, optimizer and arithmetic as
the workload runs on the GPU, with shapes and dtypes but no data, so it runs on any CPU in seconds.

The recipe is the workload's own (its `gpu` profile, read from the registry, with overrides):
torchvision's architecture with channels-last weights and input, bf16 autocast (as
`workloads.torch_common.autocast`) and SGD with momentum and weight decay for `<model>-train`; eval
mode under inference_mode for `<model>-infer`; the PTB LSTM (`workloads.ptb_lstm.build_model`) in
fp32 with gradient clipping and plain SGD for `ptb-lstm-train`.

Fake tensors live on the CPU device (PyTorch's CUDA autocast needs a GPU to run), so bf16 is CPU
autocast: it casts convolutions, matrix products and linear layers to bf16 as CUDA's does, and
keeps the loss in fp32. Optimizers run their foreach form, which PyTorch picks for CUDA tensors.
Used by the memory estimate (workloads.memory_estimate) and the analytic operator costs
(workloads.op_costs). torch and torchvision are imported inside functions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from workloads.torch_common import ARCH_KWARGS, NUM_CLASSES, logits_and_loss

# PTB's vocabulary with the end-of-sentence token (as workloads.synth.PTB_VOCAB; the real PTB too).
PTB_VOCABULARY = 10_000
KINDS = ("train", "infer", "lstm")


@dataclass
class FakeStep:
    """A built step: `run()` runs one step; `params` are the model's parameters and buffers and
    `inputs` the batch held on the device, both made before the step; `samples` per step."""

    run: Callable[[], Any]
    params: list[Any]
    inputs: list[Any]
    samples: float
    config: dict[str, Any] = field(default_factory=dict)
    optimizer: Any = None  # a training step's optimizer (its state is the optimizer's memory)


def workload_kind(name: str) -> str:
    """Which recipe a built-in workload follows: train, infer or lstm; ValueError for another."""
    if name == "ptb-lstm-train":
        return "lstm"
    for kind in ("train", "infer"):
        if name.endswith(f"-{kind}") and name[: -len(kind) - 1] in ARCH_KWARGS:
            return kind
    raise ValueError(f"no fake step for workload {name!r}: built-in GPU workloads are "
                     f"<model>-train, <model>-infer ({', '.join(ARCH_KWARGS)}) and ptb-lstm-train")


def workload_config(name: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The workload's `gpu` profile config with `overrides` (batch_size, precision, ...)."""
    from workloads import load_all

    registry = load_all()
    if name not in registry:
        raise ValueError(f"unknown workload {name!r}")
    return {**registry[name].defaults.get("gpu", {}), **(overrides or {})}


def _channels_last(module: Any) -> None:
    """Channels-last weights, set in place (`Module.to(memory_format=...)` swaps parameters, which
    fake tensors refuse)."""
    import torch

    for p in module.parameters():
        if p.dim() == 4:
            p.data = p.data.contiguous(memory_format=torch.channels_last)


def _autocast(precision: str):
    import contextlib

    import torch

    if precision == "bf16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _cnn_step(kind: str, cfg: dict[str, Any], batch: int) -> FakeStep:
    import torch
    import torchvision

    arch = cfg["model"]
    kwargs = dict(ARCH_KWARGS[arch])
    if "aux_logits" in kwargs and cfg.get("aux_logits") is not None:
        kwargs["aux_logits"] = bool(cfg["aux_logits"])
    if kind == "infer" and "aux_logits" in kwargs:
        kwargs["aux_logits"] = False  # as the inference workload builds it
    model = getattr(torchvision.models, arch)(weights=None, num_classes=NUM_CLASSES, **kwargs)
    size = int(cfg["image_size"])
    x = torch.randn(batch, 3, size, size)
    if cfg.get("channels_last"):
        _channels_last(model)
        x = x.contiguous(memory_format=torch.channels_last)
    params = list(model.parameters()) + list(model.buffers())
    precision = str(cfg.get("precision", "fp32"))
    if kind == "infer":
        model.eval()

        def infer() -> Any:
            with torch.inference_mode(), _autocast(precision):
                return model(x).argmax(dim=1)

        return FakeStep(infer, params, [x], float(batch), cfg)
    model.train()
    y = torch.randint(0, NUM_CLASSES, (batch,))
    optimizer = torch.optim.SGD(model.parameters(), lr=float(cfg.get("lr", 0.1)), momentum=float(cfg.get("momentum", 0.9)),
                                weight_decay=float(cfg.get("weight_decay", 0.0)), foreach=True)
    loss_fn = torch.nn.CrossEntropyLoss()

    def train() -> Any:  # as workloads.torch_common.cnn_sgd_step
        with _autocast(precision):
            loss = logits_and_loss(model(x), y, loss_fn)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss

    return FakeStep(train, params, [x, y], float(batch), cfg, optimizer)


def _lstm_step(cfg: dict[str, Any], batch: int, vocabulary: int) -> FakeStep:
    import torch
    import torch.nn.functional as F

    from workloads.ptb_lstm import build_model

    hidden, layers, bptt = int(cfg["hidden"]), int(cfg["layers"]), int(cfg["bptt"])
    model = build_model(vocabulary, hidden, layers, float(cfg["dropout"]), bool(cfg["tied"]), float(cfg["init"]))
    model.train()
    x = torch.randint(0, vocabulary, (bptt, batch))
    y = torch.randint(0, vocabulary, (bptt, batch))
    params = list(model.parameters())
    optimizer = torch.optim.SGD(params, lr=float(cfg["lr"]), foreach=True)
    precision, clip = str(cfg.get("precision", "fp32")), float(cfg["clip"])

    def train() -> Any:  # as workloads.ptb_lstm's step
        state = model.zero_state(batch, "cpu")
        with _autocast(precision):
            logits, _ = model(x, state)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, clip, foreach=True)
        optimizer.step()
        return loss

    return FakeStep(train, params, [x, y], float(batch * bptt), cfg, optimizer)


def build(name: str, batch_size: int | None = None, overrides: dict[str, Any] | None = None,
          vocabulary: int = PTB_VOCABULARY) -> tuple[Any, FakeStep]:
    """A fake-tensor mode and, built inside it, one step of workload `name` at `batch_size`
    (default: the workload's own). Run the step inside the returned mode."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    kind = workload_kind(name)
    cfg = workload_config(name, overrides)
    batch = int(cfg["batch_size"] if batch_size is None else batch_size)
    if batch < 1:
        raise ValueError(f"batch size must be >= 1, got {batch}")
    cfg["batch_size"] = batch
    mode = FakeTensorMode(allow_non_fake_inputs=False)
    with mode:
        step = _lstm_step(cfg, batch, vocabulary) if kind == "lstm" else _cnn_step(kind, cfg, batch)
    return mode, step


def analytic_costs(name: str, batch_size: int | None = None, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Operator costs per sample of one step of workload `name` (workloads.op_costs), counted on
    fake tensors: the analytic stand-in for a profiled split. The second of two steps is counted
    (the first makes the optimizer's state)."""
    from workloads.op_costs import trace_costs

    mode, step = build(name, batch_size, overrides)
    with mode:
        step.run()
        costs = trace_costs(step.run)
    record = costs.per_sample(step.samples)
    record["precision"] = str(step.config.get("precision", "fp32"))
    return record
