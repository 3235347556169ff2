"""A job's peak GPU memory, as the card must hold it.

- A built-in PyTorch workload reads its caching allocator's peaks (`allocator_peaks`): what its
  tensors took at most (allocated) and what the allocator held from the driver (reserved).
- A user's command is another program: NVML's per-process figure of the job's process tree,
  sampled in a thread, gives its peak (`ProcessGpuMemory`). The figure includes the CUDA context
  and whatever the job's framework keeps cached, as the card does.

Both do nothing where there is no GPU, no torch or no NVML (an empty dict). NVML is read through
nvidia-ml-py, imported inside functions; so is torch.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Iterable

from workloads.measure import process_tree


def allocator_peaks() -> dict[str, int]:
    """The PyTorch caching allocator's peaks on the current device since the process started,
    where this process has used CUDA: `gpu_mem_allocated_peak_bytes` (tensors) and
    `gpu_mem_reserved_peak_bytes` (held from the driver)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return {}
    return {"gpu_mem_allocated_peak_bytes": int(torch.cuda.max_memory_allocated()),
            "gpu_mem_reserved_peak_bytes": int(torch.cuda.max_memory_reserved())}


def used_by(processes: Iterable[tuple[int, int | None]], pids: set[int]) -> int | None:
    """GPU bytes NVML attributes to `pids` among its (pid, used bytes) records, summed over records
    (a process on two GPUs counts on both); None when none of them is listed or NVML gave no
    figure for them (a driver that hides per-process use)."""
    figures = [used for pid, used in processes if pid in pids and used is not None]
    return sum(figures) if figures else None


class ProcessGpuMemory:
    """Samples, every `period_s`, the GPU memory NVML attributes to the process tree under `root`
    (a command job's shell and everything it started) and keeps the peak of its sum."""

    def __init__(self, root: int, period_s: float = 0.2):
        self.root = root
        self.period_s = period_s
        self.peak: int | None = None
        self.samples = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml: Any = None
        self._handles: list[Any] = []
        try:
            import pynvml  # nvidia-ml-py

            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        except Exception:  # no NVML, no driver or no GPU: nothing to sample
            self._handles = []

    def _processes(self) -> list[tuple[int, int | None]]:
        out: list[tuple[int, int | None]] = []
        for handle in self._handles:
            for proc in self._nvml.nvmlDeviceGetComputeRunningProcesses(handle):
                used = getattr(proc, "usedGpuMemory", None)
                out.append((int(proc.pid), None if used is None else int(used)))
        return out

    def sample(self) -> None:
        """One reading: the tree's GPU bytes now, kept where above the peak so far."""
        used = used_by(self._processes(), set(process_tree(self.root)))
        self.samples += 1
        if used is not None and (self.peak is None or used > self.peak):
            self.peak = used

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample()
            except Exception:  # NVML stopped answering: keep what was seen
                return
            self._stop.wait(self.period_s)

    def start(self) -> None:
        if self._handles and self._thread is None:
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()

    def stop(self) -> dict[str, int]:
        """The counters: `gpu_mem_process_peak_bytes` where NVML named the job's processes."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=2)
        return {} if self.peak is None else {"gpu_mem_process_peak_bytes": self.peak}
