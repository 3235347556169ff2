"""ImageNet training with the stock PyTorch input pipeline, as the PyTorch ImageNet example
(pytorch/examples, imagenet/main.py) writes it: torchvision `datasets.ImageFolder`, the standard
transforms (RandomResizedCrop, RandomHorizontalFlip, ToTensor, Normalize) run in the DataLoader's
workers, float32 batches collated there and pinned by the loader.

The model step is the one sizer's built-in `resnet50-train` runs (workloads/imagenet_train.py, gpu
profile), so that a comparison of the two measures the input pipelines and not the model's maths:
bf16 autocast and channels-last tensors on the GPU (fp32 on the CPU, as its cpu-small profile),
batch 256, SGD with lr 0.1, momentum 0.9, weight decay 1e-4, cuDNN autotuning off.

Reports each step to sizer through `sizer_progress.step(images)` when sizer runs it (the helper is
on PYTHONPATH then); without sizer the import fails and the script runs on its own, printing a
progress line every --print-freq steps.

    python examples/own-jobs/imagenet_stock.py --data /data/imagenet/train --workers 8
    python examples/own-jobs/imagenet_stock.py --data DIR --arch resnet18 --image-size 64 \
        --batch-size 8 --workers 2 --steps 5 --device cpu          # a few steps on a small CPU host
"""

from __future__ import annotations

import argparse
import itertools
import time

import torch
import torchvision
from torchvision import datasets, transforms

try:
    import sizer_progress  # put on PYTHONPATH by sizer when it measures this job
except ImportError:
    sizer_progress = None

# The ImageNet channel statistics of the PyTorch example.
MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="an ImageFolder root: one folder of images per class")
    parser.add_argument("--workers", type=int, default=4, help="DataLoader worker processes")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--arch", default="resnet50", help="a torchvision model name, random weights")
    parser.add_argument("--image-size", type=int, default=224, help="RandomResizedCrop's output size")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=0, help="steps to train; 0: until killed")
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--print-freq", type=int, default=10, help="a progress line every this many steps")
    return parser.parse_args()


def make_loader(args: argparse.Namespace) -> torch.utils.data.DataLoader:
    """The data pipeline of the PyTorch ImageNet example, unchanged but for the crop size."""
    normalize = transforms.Normalize(mean=MEAN, std=STD)
    train_dataset = datasets.ImageFolder(
        args.data,
        transforms.Compose([
            transforms.RandomResizedCrop(args.image_size),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            normalize,
        ]))
    return torch.utils.data.DataLoader(
        train_dataset, batch_size=args.batch_size, shuffle=True,
        num_workers=args.workers, pin_memory=True)


def main() -> None:
    args = parse_args()
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    # As resnet50-train: no cuDNN autotuning (it costs seconds of a fresh process's first step for
    # no higher steady rate), TF32 allowed for what autocast leaves in fp32.
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    train_loader = make_loader(args)

    model = torchvision.models.get_model(args.arch, weights=None).to(device)
    if cuda:
        model = model.to(memory_format=torch.channels_last)
    model.train()
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=0.9, weight_decay=1e-4)

    def train_step(images: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        images = images.to(device, non_blocking=True)
        if cuda:
            images = images.contiguous(memory_format=torch.channels_last)
        target = target.to(device, non_blocking=True)
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=cuda):
            loss = criterion(model(images), target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss

    progress = Progress(args.print_freq)
    pending = None  # the last step's (loss, images): read once the next step is queued
    steps = range(1, args.steps + 1) if args.steps > 0 else itertools.count(1)
    batches = (batch for _ in itertools.count() for batch in train_loader)  # epoch after epoch
    for step, (images, target) in zip(steps, batches):
        loss = train_step(images, target)
        # Reading the previous step's loss waits for that step alone while this one is queued:
        # the GPU never idles for it, and each step is reported when it has actually run.
        if pending is not None:
            progress.finished(step - 1, *pending)
        pending = (loss, images.size(0))
    if pending is not None:
        progress.finished(args.steps, *pending)
    if sizer_progress is not None:
        sizer_progress.done()  # no more steps: sizer need not wait for another report


class Progress:
    """Each finished step: reported to sizer (when it runs the job) and, every `every` steps, a
    line with the rate since the last one."""

    def __init__(self, every: int):
        self.every = max(1, every)
        self.since = time.monotonic()
        self.images = 0

    def finished(self, step: int, loss: torch.Tensor, images: int) -> None:
        value = loss.item()  # waits for the step to finish
        if sizer_progress is not None:
            sizer_progress.step(images)
        self.images += images
        if step % self.every == 0:
            now = time.monotonic()
            rate = self.images / max(now - self.since, 1e-9)
            print(f"step {step} | {rate:,.1f} images/s | loss {value:.4f}", flush=True)
            self.since, self.images = now, 0


if __name__ == "__main__":
    main()
