"""A plain PyTorch ResNet-50 training loop, the yardstick for sizer's own harness.

bf16 autocast, channels-last, batch 256, SGD with momentum, input already on the GPU: the GPU's
training ceiling as a user's own script measures it. Compare its images/s with
`resnet50-train --input synthetic` (gpu profile) measured in the same run on the same GPU: sizer's
harness (meter, step clock, counters) must stay within 10% of it.

Usage: python lab/benchmarks/plain_resnet50.py [--batch 256] [--steps 100] [--warmup 20] [--json]
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import torchvision


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--steps", type=int, default=100, help="timed steps")
    parser.add_argument("--warmup", type=int, default=20, help="untimed steps first (cuDNN autotuning)")
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("plain_resnet50: needs a CUDA GPU")

    torch.backends.cudnn.benchmark = True
    device = "cuda"
    model = torchvision.models.resnet50(weights=None).to(device, memory_format=torch.channels_last)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(args.batch, 3, args.size, args.size, device=device).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (args.batch,), device=device)

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    rate = args.batch * args.steps / seconds
    out = {
        "benchmark": "plain_resnet50",
        "images_per_s": rate,
        "batch": args.batch,
        "steps": args.steps,
        "seconds": seconds,
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
    }
    if args.json:
        print(json.dumps(out))
    else:
        print(f"plain ResNet-50 training on {out['gpu']}: {rate:,.0f} images/s "
              f"(batch {args.batch}, {args.steps} steps in {seconds:.2f} s, bf16, channels-last)")


if __name__ == "__main__":
    main()
