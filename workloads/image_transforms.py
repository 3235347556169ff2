"""What happens to an ImageNet-style image between its JPEG bytes and the model: decoding, the
torchvision reference recipe's augmentation in the loader worker, and the normalization on the
device.

Workers hand batches over as uint8 HWC images and the training process normalizes them on its
device (config `normalize: device`, the default), as fast loaders do (timm's prefetcher, DALI,
FFCV). `normalize: worker` is torchvision's reference recipe, ToTensor + Normalize in the worker
and float batches: on an H200 host that conversion cost the workers about 10% of their per-image
rate, a float batch is four times the bytes through shared memory and the pin thread, and the
whole pipeline trained 1.27x (4 vCPUs) to 1.65x (16) faster handing over uint8.

torch, torchvision, numpy and PIL are imported inside functions: importing this module needs none.
"""

from __future__ import annotations

import io
from typing import Any, Callable

from workloads.torch_common import check_choice

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
NORMALIZE = ("device", "worker")  # where ToTensor + Normalize happen (see the module's docstring)


def decode_rgb(data: bytes):
    from PIL import Image

    img = Image.open(io.BytesIO(data))
    return img.convert("RGB")


class ToHWCUint8:
    """PIL image -> uint8 tensor in HWC order, the bytes as decoded: a batch of these is the
    channels-last layout the device wants, so no worker spends time converting or transposing."""

    def __call__(self, pic: Any):
        import numpy as np
        import torch

        return torch.from_numpy(np.array(pic, dtype=np.uint8, copy=True))


def _to_tensor(normalize: str) -> list:
    from torchvision import transforms as T

    check_choice({"normalize": normalize}, "normalize", NORMALIZE)
    if normalize == "device":
        return [ToHWCUint8()]
    return [T.ToTensor(), T.Normalize(IMAGENET_MEAN, IMAGENET_STD)]


def steps_before_uint8(transform: Callable | None) -> Callable | None:
    """The steps of a Compose that ends in `ToHWCUint8`, without it (None for any other transform)."""
    steps = getattr(transform, "transforms", None)
    if not steps or not isinstance(steps[-1], ToHWCUint8):
        return None
    from torchvision import transforms as T

    return T.Compose(steps[:-1])


def pixel_mean_std(device: str) -> tuple[Any, Any]:
    """ImageNet's mean and std on the 0..255 scale of decoded bytes, shaped to broadcast over NCHW."""
    import torch

    mean = torch.tensor(IMAGENET_MEAN, device=device).view(1, 3, 1, 1) * 255
    std = torch.tensor(IMAGENET_STD, device=device).view(1, 3, 1, 1) * 255
    return mean, std


def train_transform(size: int, normalize: str = "device"):
    """Decode-side augmentation of the torchvision ImageNet reference recipe (RandomResizedCrop,
    flip), handing over uint8 HWC (`normalize: device`) or normalized float CHW (`worker`)."""
    from torchvision import transforms as T

    return T.Compose([T.RandomResizedCrop(size), T.RandomHorizontalFlip(), *_to_tensor(normalize)])


def eval_transform(size: int, resize: int, normalize: str = "device"):
    from torchvision import transforms as T

    return T.Compose([T.Resize(resize), T.CenterCrop(size), *_to_tensor(normalize)])


class DeviceInput:
    """A loader batch onto the device as the model's input: uint8 HWC batches are copied as bytes,
    then converted to float and normalized there (channels-last by construction: NHWC memory
    seen as NCHW); float CHW batches (`normalize: worker`) are only copied."""

    def __init__(self, device: str, normalize: str, channels_last: bool):
        import torch

        self.device = device
        self.normalize = check_choice({"normalize": normalize}, "normalize", NORMALIZE)
        self.memory_format = torch.channels_last if channels_last else torch.contiguous_format
        self.mean, self.std = pixel_mean_std(device)

    def __call__(self, x: Any):
        x = x.to(self.device, non_blocking=True)
        if self.normalize == "worker":
            return x.contiguous(memory_format=self.memory_format)
        x = x.permute(0, 3, 1, 2).float()  # NHWC bytes -> NCHW view, channels-last memory
        x = (x - self.mean) / self.std
        return x.contiguous(memory_format=self.memory_format)
