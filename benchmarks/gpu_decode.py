"""nvjpeg on the GPU: batch decode rate, the training augmentation's rate, and whether decoding
waits for work already queued on the GPU (it must not, for decode to overlap training).

Generates its own ImageNet-like JPEGs (workloads.synth), decodes them with
torchvision.io.decode_jpeg on CUDA in batches, checks the pixels against the CPU decoder, and times
workloads.torch_common.GpuAugment (decode + RandomResizedCrop + flip + normalize).

Usage: python benchmarks/gpu_decode.py [--images 512] [--batch 256] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=512)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    import torch
    from torchvision.io import ImageReadMode, decode_jpeg

    from workloads.synth import synth_jpeg
    from workloads.torch_common import GpuAugment

    if not torch.cuda.is_available():
        raise SystemExit("gpu_decode: needs a CUDA GPU")
    raw = [torch.frombuffer(bytearray(synth_jpeg(1, i)), dtype=torch.uint8) for i in range(args.images)]
    batches = [raw[i : i + args.batch] for i in range(0, len(raw) - args.batch + 1, args.batch)]
    out: dict = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "batch": args.batch}

    # Pixels: the GPU decoder against the CPU one (IDCT and upsampling differ by a few levels).
    gpu = decode_jpeg(raw[:16], mode=ImageReadMode.RGB, device="cuda")
    diffs = [(g.cpu().int() - decode_jpeg(r, mode=ImageReadMode.RGB).int()).abs().float().mean().item() for g, r in zip(gpu, raw[:16])]
    out["mean_abs_diff_vs_cpu"] = max(diffs)

    def rate(fn, repeats: int = 3) -> float:
        fn(batches[0])
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        n = 0
        for _ in range(repeats):
            for b in batches:
                fn(b)
                n += len(b)
        torch.cuda.synchronize()
        return n / (time.perf_counter() - t0)

    out["decode_images_per_s"] = rate(lambda b: decode_jpeg(b, mode=ImageReadMode.RGB, device="cuda"))
    gpu_augment = GpuAugment(224, "cuda")

    def augment(batch: list):  # as the loader hands a batch over: one flat tensor and the lengths
        return gpu_augment(torch.cat(batch), [len(t) for t in batch])

    out["augment_images_per_s"] = rate(augment)
    x = augment(batches[0])
    torch.cuda.synchronize()
    out["augment_output"] = {"shape": list(x.shape), "finite": bool(torch.isfinite(x).all()),
                             "mean": float(x.mean()), "std": float(x.std())}

    # Does a decode call return while earlier GPU work is still queued? Queue ~0.3 s of matmuls.
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(20):
        a @ a
    torch.cuda.synchronize()
    queued_s = time.perf_counter() - t0
    for label, fn in (("decode", lambda b: decode_jpeg(b, mode=ImageReadMode.RGB, device="cuda")), ("augment", augment)):
        for _ in range(20):
            a @ a
        t0 = time.perf_counter()
        fn(batches[0])
        returned = time.perf_counter() - t0
        torch.cuda.synchronize()
        out[f"{label}_call_s_behind_{queued_s:.2f}s_of_queued_work"] = returned
    print(json.dumps(out) if args.json else json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
