"""Pieces shared by the PyTorch workloads: config checks, device and precision setup, the
torchvision CNNs and their training step, synthetic input and the versions a result reports.

The input pipeline lives beside it (`workloads.image_transforms`, `workloads.image_loader`,
`workloads.batch_buffers`, `workloads.gpu_augment`), the timed loop in `workloads.loop`.
torch and torchvision are imported inside functions: importing this module needs neither.
"""

from __future__ import annotations

import contextlib
import os
import random
import sys
from typing import Any, Callable, Sequence

from workloads import distributed
from workloads.loop import is_cuda

NUM_CLASSES = 1000
DEVICES = ("cpu", "cuda")
PRECISIONS = ("bf16", "fp32")  # bf16: autocast on the device; fp32: none

# torchvision constructor arguments per architecture: random init, and for googlenet no auxiliary
# heads (its torchvision default turns them on only for pretrained weights' sake).
ARCH_KWARGS: dict[str, dict[str, Any]] = {
    "alexnet": {},
    "vgg11": {},
    "vgg16": {},
    "resnet18": {},
    "resnet50": {},
    "googlenet": {"aux_logits": False, "init_weights": True},
    "inception_v3": {"aux_logits": True, "init_weights": True},
}


def prefer_sleeping_openmp(cfg: dict[str, Any]) -> bool:
    """On a CPU device the model's OpenMP threads share the shape's vCPUs with the loader workers;
    threads that spin while they wait take CPU from the workers (on 2 busy cores, steps ran 5x
    slower and erratic). Ask OpenMP to sleep instead. It only takes effect before torch is first
    imported, as in a fresh worker; returns whether it did."""
    if cfg.get("device", "cpu") != "cpu" or "torch" in sys.modules:
        return False
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return True


def check_choice(cfg: dict[str, Any], key: str, allowed: Sequence[str]) -> str:
    value = cfg.get(key)
    if value not in allowed:
        raise ValueError(f"config {key}={value!r} is not one of {', '.join(allowed)}")
    return str(value)


def setup_device(cfg: dict[str, Any], vcpus: int, seed: int) -> str:
    """Pick the device (config `device`: cuda or cpu), seed everything and size the main process's
    thread pool to the shape (config `threads` overrides); in a rank of a multi-GPU point, take its
    GPU and join its process group (`workloads.distributed.join`). Returns 'cuda' or 'cpu'."""
    import torch

    device = cfg.get("device", "cpu")
    if device not in DEVICES:
        raise ValueError(f"config device={device!r} is not cpu or cuda")
    if device == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("the gpu profile needs a CUDA GPU and none is visible (use profile cpu-small)")
        # cuDNN's autotuning (config `cudnn_benchmark`) is off by default: every point is a fresh
        # process, and on an H100 the autotuning took 4.6 s of ResNet-50 training's first step (0.7 s
        # without) for a steady rate no higher (3,976 against 3,987 images/s).
        torch.backends.cudnn.benchmark = bool(cfg.get("cudnn_benchmark", False))
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    torch.set_num_threads(max(1, int(cfg.get("threads") or vcpus)))
    random.seed(seed)
    torch.manual_seed(seed)
    distributed.join(device)
    return device


def autocast(device: str, precision: str):
    """bf16 autocast on the GPU when asked; a no-op context otherwise (fp32)."""
    import torch

    if precision not in PRECISIONS:
        raise ValueError(f"config precision={precision!r} is not bf16 or fp32")
    if precision == "bf16":
        return torch.autocast(device_type="cuda" if is_cuda(device) else "cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def build_cnn(arch: str, device: str, channels_last: bool, aux_logits: bool | None = None):
    """A torchvision architecture with random weights, on the device. `aux_logits` overrides the
    auxiliary-head default of googlenet and inception_v3."""
    import torch
    import torchvision

    if arch not in ARCH_KWARGS:
        raise ValueError(f"config model={arch!r} is not one of {', '.join(ARCH_KWARGS)}")
    kwargs = dict(ARCH_KWARGS[arch])
    if aux_logits is not None and "aux_logits" in kwargs:
        kwargs["aux_logits"] = bool(aux_logits)
    model = getattr(torchvision.models, arch)(weights=None, num_classes=NUM_CLASSES, **kwargs)
    model = model.to(device)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    return model


def logits_and_loss(output: Any, target: Any, loss_fn: Callable) -> Any:
    """Cross-entropy of a model output; Inception v3 in training mode also returns auxiliary
    logits, weighted 0.4 as in its paper and torchvision's reference recipe."""
    aux = getattr(output, "aux_logits", None)
    logits = getattr(output, "logits", output)
    loss = loss_fn(logits, target)
    if aux is not None:
        loss = loss + 0.4 * loss_fn(aux, target)
    return loss


def cnn_sgd_step(model: Any, optimizer: Any, device: str, precision: str) -> Callable[[Any, Any], Any]:
    """One training step of a CNN on an input batch already in the model's form and its labels:
    forward under autocast, cross-entropy, backward, optimizer update. Returns the loss, not
    synchronized (the host runs ahead of the device as a training loop does)."""
    import torch

    loss_fn = torch.nn.CrossEntropyLoss()

    def step(x: Any, y: Any) -> Any:
        y = y.to(device, non_blocking=True)
        with autocast(device, precision):
            loss = logits_and_loss(model(x), y, loss_fn)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss

    return step


def synthetic_images(batch_size: int, size: int, device: str, channels_last: bool) -> Any:
    """One random batch of normalized images on the device, in the model's memory format: the
    input of a point that measures the model alone (input: synthetic)."""
    import torch

    x = torch.randn(batch_size, 3, size, size, device=device)
    return x.contiguous(memory_format=torch.channels_last) if channels_last else x


def framework_versions() -> dict[str, str]:
    import torch

    out = {"torch": str(torch.__version__)}
    try:
        import torchvision

        out["torchvision"] = torchvision.__version__
    except ImportError:
        pass
    try:
        import PIL

        out["pillow"] = PIL.__version__
    except ImportError:
        pass
    if torch.cuda.is_available():
        out["cuda"] = str(torch.version.cuda)
        out["gpu"] = torch.cuda.get_device_name(0)
    return out
