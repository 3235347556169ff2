"""What a PyTorch worker's start costs on this GPU host, piece by piece, each in a fresh process.

A sweep point is a fresh worker process (its own cgroups, its own limits), so every point pays the
interpreter, PyTorch's import, the CUDA context and the first training step (cuDNN's autotuning)
before its window. This measures those pieces apart, each in a new interpreter as a point would:

- import: `import torch, torchvision`;
- context: the CUDA context and a first kernel (`torch.zeros(1, device="cuda")`), without and with
  another process holding the GPU open through NVML the whole time (as a sweep's parent can: with
  the driver's persistence mode off, the GPU is set up again for each process that opens it first);
- train: ResNet-50 training (bf16 autocast, channels-last, batch 256, SGD, input on the GPU, as
  benchmarks/plain_resnet50.py): the first step, the next nine, and the rate over the 40 after,
  with cuDNN's autotuning (`cudnn.benchmark`) on and off;
- infer: ResNet-50 inference as resnet50-infer runs it on a GPU (eval mode, `inference_mode`, bf16
  autocast, channels-last, batch 256, input on the GPU): the same figures over 9 and 120 batches,
  autotuning on and off (sizer turns it off by default: does cuDNN's heuristic pick kernels as fast?).

--parts picks which (default all four). Prints a table of medians over --repeats runs (and JSON with
--json). Needs a CUDA GPU; --from FILE prints the table of a run's --json output again, measuring nothing.

Usage: python benchmarks/worker_start.py [--repeats 3] [--parts import,context,train,infer] [--json]
       python benchmarks/worker_start.py --from FILE
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

# argv: autotuning on|off, then train|infer.
_STEP = """
import json, sys, time, torch, torchvision
torch.backends.cudnn.benchmark = sys.argv[1] == "on"
train = sys.argv[2] == "train"
model = torchvision.models.resnet50(weights=None).to("cuda", memory_format=torch.channels_last)
model.train(train)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
loss_fn = torch.nn.CrossEntropyLoss()
x = torch.randn(256, 3, 224, 224, device="cuda").contiguous(memory_format=torch.channels_last)
y = torch.randint(0, 1000, (256,), device="cuda")
torch.cuda.synchronize()
def step():
    if train:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
    else:
        with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16):
            model(x)
steady = 40 if train else 120  # inference steps are about a third as long
t0 = time.perf_counter(); step(); torch.cuda.synchronize(); first = time.perf_counter() - t0
t0 = time.perf_counter()
for _ in range(9): step()
torch.cuda.synchronize(); nine = time.perf_counter() - t0
t0 = time.perf_counter()
for _ in range(steady): step()
torch.cuda.synchronize(); rate = steady * 256 / (time.perf_counter() - t0)
print(json.dumps({"first_s": first, "next9_s": nine, "images_per_s": rate}))
"""

PARTS = ("import", "context", "train", "infer")

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


def measure(repeats: int, parts: tuple[str, ...] = PARTS) -> dict:
    rows: dict[str, list[float]] = {}

    def add(name: str, value: float) -> None:
        rows.setdefault(name, []).append(value)

    out = {"persistence_mode": persistence_mode(), "parts": list(parts)}
    if "import" in parts:
        for _ in range(repeats):
            value, wall = _python(_IMPORT)
            add("import torch, torchvision (s)", float(value))
            add("interpreter + import, wall (s)", wall)
    if "context" in parts:
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
        finally:
            holder.kill()
            holder.wait()
    for kind in ("train", "infer"):
        if kind not in parts:
            continue
        # On and off alternate, so a drift of the host falls on both alike.
        for _ in range(repeats):
            for mode in ("on", "off"):
                value, wall = _python(_STEP, mode, kind)
                got = json.loads(value)
                label = "step" if kind == "train" else "inference batch"
                add(f"{kind}: first {label}, autotuning {mode} (s)", got["first_s"])
                add(f"{kind}: next 9, autotuning {mode} (s)", got["next9_s"])
                add(f"{kind}: steady images/s, autotuning {mode}", got["images_per_s"])
                add(f"{kind}: process wall, autotuning {mode} (s)", wall)
    import torch

    out["gpu"] = torch.cuda.get_device_name(0)
    out["torch"] = torch.__version__
    out["rows"] = {name: {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v)} for name, v in rows.items()}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--parts", default=",".join(PARTS), help="which pieces to time, comma-separated")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--from", dest="from_file", metavar="FILE", help="print a --json run's table, measuring nothing")
    args = parser.parse_args()
    if args.from_file:
        try:
            print_table(json.loads(open(args.from_file).read()))
        except (OSError, ValueError, KeyError) as exc:
            print(f"worker_start: error: cannot read {args.from_file}: {exc}", file=sys.stderr)
            return 2
        return 0
    if args.repeats < 1:
        print("worker_start: error: --repeats wants 1 or more", file=sys.stderr)
        return 2
    parts = tuple(p.strip() for p in args.parts.split(",") if p.strip())
    unknown = [p for p in parts if p not in PARTS]
    if unknown or not parts:
        print(f"worker_start: error: --parts takes {', '.join(PARTS)} (got {args.parts!r})", file=sys.stderr)
        return 2
    import torch

    if not torch.cuda.is_available():
        print("worker_start: error: needs a CUDA GPU (none is visible here)", file=sys.stderr)
        return 2
    out = measure(args.repeats, parts)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print_table(out)
    return 0


def print_table(out: dict) -> None:
    print(f"{out.get('gpu', '?')}, PyTorch {out.get('torch', '?')}, persistence mode {out.get('persistence_mode', '?')}")
    width = max(len(name) for name in out["rows"])
    print(f"{'':<{width}}  {'median':>9}  {'min':>9}  {'max':>9}")
    for name, row in out["rows"].items():
        print(f"{name:<{width}}  {row['median']:>9.2f}  {row['min']:>9.2f}  {row['max']:>9.2f}")


if __name__ == "__main__":
    sys.exit(main())
