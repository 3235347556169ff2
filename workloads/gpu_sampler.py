"""GPU sampling inside a worker: utilisation, memory in use, the memory's busy share and the
host-to-device PCIe traffic, through NVML in a thread; nothing without NVML, a driver or a GPU.
Standard library only besides NVML (imported when a sampler is made)."""

from __future__ import annotations

import os
import threading
from typing import Any

from workloads import stats


def sampled_gpu() -> str:
    """The GPU a worker's sampler reads, as NVML knows it (an index or a UUID): the first of the
    point's GPUs (SIZER_NVML_GPUS, set by sizer's runner; a rank of a multi-GPU point gets its own),
    else GPU 0."""
    listed = [g.strip() for g in os.environ.get("SIZER_NVML_GPUS", "").split(",") if g.strip()]
    return listed[0] if listed else "0"


class GpuSampler:
    """Samples GPU utilisation and memory through NVML in a thread; does nothing without a GPU.
    `gpu`: an NVML index or UUID (default `sampled_gpu()`)."""

    def __init__(self, gpu: int | str | None = None, period_s: float = 0.2):
        self.period_s = period_s
        self.util: list[float] = []
        self.mem_used: list[int] = []
        self.mem_util: list[float] = []  # the share of time device memory was read or written
        self.pcie_rx_kbps: list[float] = []  # host-to-device PCIe traffic (NVML's KB/s, over 20 ms)
        self._pcie = True
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._handle = None
        self.name = ""
        try:
            import pynvml  # nvidia-ml-py

            pynvml.nvmlInit()
            self._nvml = pynvml
            gpu = sampled_gpu() if gpu is None else str(gpu)
            self._handle = (pynvml.nvmlDeviceGetHandleByIndex(int(gpu)) if gpu.isdigit()
                            else pynvml.nvmlDeviceGetHandleByUUID(gpu))
            raw = pynvml.nvmlDeviceGetName(self._handle)
            self.name = raw.decode() if isinstance(raw, bytes) else raw
        except Exception:  # no NVML, no driver or no GPU: a normal answer
            self._handle = None

    @property
    def available(self) -> bool:
        return self._handle is not None

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                rates = self._nvml.nvmlDeviceGetUtilizationRates(self._handle)
                self.util.append(float(rates.gpu))
                self.mem_util.append(float(rates.memory))
                self.mem_used.append(int(self._nvml.nvmlDeviceGetMemoryInfo(self._handle).used))
            except Exception:
                return
            if self._pcie:
                try:
                    self.pcie_rx_kbps.append(float(self._nvml.nvmlDeviceGetPcieThroughput(
                        self._handle, self._nvml.NVML_PCIE_UTIL_RX_BYTES)))
                except Exception:  # a GPU or driver without the counter: the rest is still sampled
                    self._pcie = False
            self._stop.wait(self.period_s)

    def start(self) -> None:
        if self.available and self._thread is None:
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()

    def stop(self) -> dict[str, Any]:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=2)
        if not self.util:
            return {}
        out: dict[str, Any] = {
            "gpu_name": self.name,
            "gpu_util_pct": stats.median(self.util),
            "gpu_util_mean_pct": sum(self.util) / len(self.util),
            "gpu_mem_peak_bytes": max(self.mem_used),
        }
        if self.mem_util:
            out["gpu_mem_util_pct"] = sum(self.mem_util) / len(self.mem_util)
        if self.pcie_rx_kbps:
            out["pcie_rx_mbps"] = sum(self.pcie_rx_kbps) / len(self.pcie_rx_kbps) * 1024 / 1e6
        return out
