"""Decoding on the GPU (config `decode: gpu`): loader workers only read a batch's JPEG bytes and
pack them into one tensor (`collate_raw`); the training process decodes them with nvjpeg and
augments them on the GPU (`GpuAugment`).

torch and torchvision are imported inside functions: importing this module needs neither.
"""

from __future__ import annotations

import math
import random
from typing import Any

from workloads.image_transforms import pixel_mean_std


def collate_raw(batch):
    """JPEG bytes of a batch packed into one uint8 tensor with their lengths, and the labels: one
    shared-memory block per batch to hand over from a worker, not one per image."""
    import torch

    lengths = [len(b[0]) for b in batch]
    return torch.cat([b[0] for b in batch]), lengths, torch.tensor([b[1] for b in batch], dtype=torch.long)


def split_raw(flat: Any, lengths: list[int]) -> list:
    """The per-image byte tensors of a `collate_raw` batch (views, no copies)."""
    return list(flat.split(lengths))


def random_resized_crop_box(
    height: int, width: int, rng: random.Random, scale: tuple[float, float] = (0.08, 1.0),
    ratio: tuple[float, float] = (3 / 4, 4 / 3),
) -> tuple[int, int, int, int]:
    """(top, left, h, w) of a RandomResizedCrop, torchvision's algorithm with Python's RNG (drawing
    through torch costs tens of microseconds per image, which adds up on the GPU path)."""
    area = height * width
    log_lo, log_hi = math.log(ratio[0]), math.log(ratio[1])
    for _ in range(10):
        target = area * rng.uniform(scale[0], scale[1])
        aspect = math.exp(rng.uniform(log_lo, log_hi))
        w = int(round(math.sqrt(target * aspect)))
        h = int(round(math.sqrt(target / aspect)))
        if 0 < w <= width and 0 < h <= height:
            return rng.randint(0, height - h), rng.randint(0, width - w), h, w
    in_ratio = width / height  # fallback: the whole image, cropped to the ratio range, centred
    if in_ratio < ratio[0]:
        w, h = width, int(round(width / ratio[0]))
    elif in_ratio > ratio[1]:
        h, w = height, int(round(height * ratio[1]))
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


class GpuAugment:
    """nvjpeg decode of a batch of JPEG byte tensors, then RandomResizedCrop + flip + normalize on
    the GPU into one channels-last float batch.

    Crops differ in size, so each is resized on its own (a view, a float copy, one antialiased
    bilinear resize); flip and normalize then run once on the whole batch. The work runs on a side
    stream so decoding the next batch overlaps the training step queued on the main stream.
    """

    def __init__(self, size: int, device: str, seed: int = 0):
        import torch

        self.size = size
        self.device = device
        self.rng = random.Random(seed)
        self.stream = torch.cuda.Stream(device=device)
        self.mean, self.std = pixel_mean_std(device)
        torch.cuda.synchronize(device)  # the side stream uses mean and std made on the main one

    def _crops(self, images: list) -> Any:
        """Each image's random crop, resized to the output size, in one float NCHW batch."""
        import torch
        import torch.nn.functional as F

        out = torch.empty((len(images), 3, self.size, self.size), dtype=torch.float32, device=self.device)
        for i, img in enumerate(images):
            top, left, h, w = random_resized_crop_box(int(img.shape[-2]), int(img.shape[-1]), self.rng)
            crop = img[:, top : top + h, left : left + w].unsqueeze(0).float()
            out[i] = F.interpolate(crop, size=(self.size, self.size), mode="bilinear", antialias=True, align_corners=False)[0]
        return out

    def __call__(self, flat: Any, lengths: list[int]) -> Any:
        import torch
        from torchvision.io import ImageReadMode, decode_jpeg

        main = torch.cuda.current_stream(self.device)
        with torch.cuda.stream(self.stream):
            images = decode_jpeg(split_raw(flat, lengths), mode=ImageReadMode.RGB, device=self.device)
            n = len(images)
            out = self._crops(images)
            flip = torch.rand(n, device=self.device) < 0.5
            out = torch.where(flip.view(n, 1, 1, 1), out.flip(-1), out)
            out = ((out - self.mean) / self.std).contiguous(memory_format=torch.channels_last)
        main.wait_stream(self.stream)
        out.record_stream(main)  # made on the side stream, used on the main one
        return out
