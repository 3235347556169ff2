"""What a PyTorch worker's start costs on this GPU host, piece by piece, each in a fresh process.

A sweep point is a fresh worker process (its own cgroups, its own limits), so every point pays the
interpreter, PyTorch's import, the CUDA context and the first training step (cuDNN's autotuning)
before its window. This measures those pieces apart, each in a new interpreter as a point would:

- import: `import torch, torchvision`;
- context: the CUDA context and a first kernel (`torch.zeros(1, device="cuda")`), without and with
  another process holding the GPU open through NVML the whole time (as a sweep's parent can: with
  the driver's persistence mode off, the GPU is set up again for each process that opens it first);
- step: ResNet-50 training (bf16 autocast, channels-last, batch 256, SGD, input on the GPU, as
  benchmarks/plain_resnet50.py): the first step, the next nine, and the rate over the 40 after,
  with cuDNN's autotuning (`cudnn.benchmark`) on and off.

Prints a table of medians over --repeats runs (and JSON with --json). Needs a CUDA GPU.

Usage: python benchmarks/worker_start.py [--repeats 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

_IMPORT = """
import time; t = time.perf_counter()
import torch, torchvision
print(time.perf_counter() - t)
"""

_CONTEXT = """
import time, torch; t = time.perf_counter()
torch.zeros(1, device="cuda"); torch.cuda.synchronize()
print(time.perf_counter() - t)
"""

_STEP = """
import json, sys, time, torch, torchvision
torch.backends.cudnn.benchmark = sys.argv[1] == "on"
model = torchvision.models.resnet50(weights=None).to("cuda", memory_format=torch.channels_last).train()
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
loss_fn = torch.nn.CrossEntropyLoss()
x = torch.randn(256, 3, 224, 224, device="cuda").contiguous(memory_format=torch.channels_last)
y = torch.randint(0, 1000, (256,), device="cuda")
torch.cuda.synchronize()
def step():
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = loss_fn(model(x), y)
    opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
t0 = time.perf_counter(); step(); torch.cuda.synchronize(); first = time.perf_counter() - t0
t0 = time.perf_counter()
for _ in range(9): step()
torch.cuda.synchronize(); nine = time.perf_counter() - t0
t0 = time.perf_counter()
for _ in range(40): step()
torch.cuda.synchronize(); rate = 40 * 256 / (time.perf_counter() - t0)
print(json.dumps({"first_s": first, "next9_s": nine, "images_per_s": rate}))
"""

_HOLDER = """
import time, pynvml
pynvml.nvmlInit(); pynvml.nvmlDeviceGetHandleByIndex(0)
print("ready", flush=True)
time.sleep(3600)
"""


def _python(code: str, *args: str) -> tuple[str, float]:
    """stdout's last line of a fresh interpreter running `code`, and its wall seconds."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1], time.perf_counter() - t0


def persistence_mode() -> str:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            mode = pynvml.nvmlDeviceGetPersistenceMode(pynvml.nvmlDeviceGetHandleByIndex(0))
            return "on" if mode == pynvml.NVML_FEATURE_ENABLED else "off"
        finally:
            pynvml.nvmlShutdown()
    except Exception as exc:  # noqa: BLE001 - a host without NVML says so in the table
        return f"unknown ({type(exc).__name__})"


def measure(repeats: int) -> dict:
    rows: dict[str, list[float]] = {}

    def add(name: str, value: float) -> None:
        rows.setdefault(name, []).append(value)

    out = {"persistence_mode": persistence_mode()}
    for _ in range(repeats):
        value, wall = _python(_IMPORT)
        add("import torch, torchvision (s)", float(value))
        add("interpreter + import, wall (s)", wall)
    for _ in range(repeats):
        value, wall = _python(_CONTEXT)
        add("CUDA context, nothing holding the GPU (s)", float(value))
        add("process with CUDA context, wall (s)", wall)
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER], stdout=subprocess.PIPE, text=True)
    try:
        holder.stdout.readline()
        for _ in range(repeats):
            value, wall = _python(_CONTEXT)
            add("CUDA context, NVML held open (s)", float(value))
            add("process with CUDA context, NVML held, wall (s)", wall)
        for mode in ("on", "off"):
            for _ in range(repeats):
                value, wall = _python(_STEP, mode)
                got = json.loads(value)
                add(f"first step, autotuning {mode} (s)", got["first_s"])
                add(f"next 9 steps, autotuning {mode} (s)", got["next9_s"])
                add(f"steady images/s, autotuning {mode}", got["images_per_s"])
                add(f"step process wall, autotuning {mode} (s)", wall)
    finally:
        holder.kill()
        holder.wait()
    import torch

    out["gpu"] = torch.cuda.get_device_name(0)
    out["torch"] = torch.__version__
    out["rows"] = {name: {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v)} for name, v in rows.items()}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.repeats < 1:
        print("worker_start: error: --repeats wants 1 or more", file=sys.stderr)
        return 2
    import torch

    if not torch.cuda.is_available():
        print("worker_start: error: needs a CUDA GPU (none is visible here)", file=sys.stderr)
        return 2
    out = measure(args.repeats)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"{out.get('gpu', '?')}, PyTorch {out.get('torch', '?')}, persistence mode {out['persistence_mode']}")
    width = max(len(name) for name in out["rows"])
    print(f"{'':<{width}}  {'median':>9}  {'min':>9}  {'max':>9}")
    for name, row in out["rows"].items():
        print(f"{name:<{width}}  {row['median']:>9.2f}  {row['min']:>9.2f}  {row['max']:>9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
