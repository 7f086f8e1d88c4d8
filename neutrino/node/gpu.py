"""A host's NVIDIA GPUs, read through NVIDIA's management library (NVML, ``nvidia-ml-py``).

The library is loaded only where a driver is there (``/proc/driver/nvidia`` or
``libnvidia-ml.so.1`` loadable); a host without one reports no devices and its agent still
serves CPU engines. Every read is a few NVML calls (microseconds each); an error of one
device is reported on that device, never raised to the agent's routes.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("neutrino.node")
MB = 1 << 20


@dataclass(frozen=True, slots=True)
class DeviceFacts:
    index: int
    name: str
    uuid: str
    memory_total_bytes: int
    compute_capability: str  # "9.0"

    def to_dict(self) -> dict[str, object]:
        return {
            "index": self.index,
            "name": self.name,
            "uuid": self.uuid,
            "vram_total_mb": self.memory_total_bytes // MB,
            "compute_capability": self.compute_capability,
        }


@dataclass(frozen=True, slots=True)
class DeviceHealth:
    index: int
    memory_used_bytes: int
    memory_free_bytes: int
    utilization: float  # 0..1, the GPU's busy share over NVML's last sample period
    temperature_c: int

    def to_dict(self) -> dict[str, object]:
        return {
            "index": self.index,
            "vram_used_mb": self.memory_used_bytes // MB,
            "vram_free_mb": self.memory_free_bytes // MB,
            "utilization": self.utilization,
            "temperature_c": self.temperature_c,
        }


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def cuda_version(encoded: int) -> str:
    """NVML's CUDA driver version (``12040``) as people write it (``"12.4"``)."""
    return f"{encoded // 1000}.{encoded % 1000 // 10}"


def driver_present() -> bool:
    """Whether an NVIDIA driver seems to be installed (cheap; no library is loaded)."""
    if Path("/proc/driver/nvidia/version").exists():
        return True
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


class Gpus:
    """The NVML session of an agent: opened once, shut at the end."""

    def __init__(self, nvml: Any) -> None:
        self._nvml = nvml
        self._handles = [
            nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())
        ]
        self.driver_version = _text(nvml.nvmlSystemGetDriverVersion())
        self.cuda_version = cuda_version(int(nvml.nvmlSystemGetCudaDriverVersion()))

    @classmethod
    def open(cls) -> tuple[Gpus | None, str]:
        """The host's GPUs, or None and why not (no driver, no library, NVML failed)."""
        if not driver_present():
            return None, "no NVIDIA driver on this host"
        try:
            import pynvml
        except ImportError:
            return None, "nvidia-ml-py is not installed"
        try:
            pynvml.nvmlInit()
            return cls(pynvml), ""
        except pynvml.NVMLError as exc:
            log.warning("NVML could not be initialised: %s", exc)
            return None, f"NVML: {exc}"

    def __len__(self) -> int:
        return len(self._handles)

    def facts(self) -> list[DeviceFacts]:
        nvml, out = self._nvml, []
        for i, h in enumerate(self._handles):
            major, minor = nvml.nvmlDeviceGetCudaComputeCapability(h)
            out.append(
                DeviceFacts(
                    index=i,
                    name=_text(nvml.nvmlDeviceGetName(h)),
                    uuid=_text(nvml.nvmlDeviceGetUUID(h)),
                    memory_total_bytes=int(nvml.nvmlDeviceGetMemoryInfo(h).total),
                    compute_capability=f"{major}.{minor}",
                )
            )
        return out

    def health(self) -> list[DeviceHealth]:
        nvml, out = self._nvml, []
        for i, h in enumerate(self._handles):
            try:
                mem = nvml.nvmlDeviceGetMemoryInfo(h)
                util = nvml.nvmlDeviceGetUtilizationRates(h).gpu / 100.0
                temp = int(nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU))
            except nvml.NVMLError as exc:  # a device fallen off the bus, say
                log.warning("GPU %d: NVML read failed: %s", i, exc)
                continue
            out.append(DeviceHealth(i, int(mem.used), int(mem.free), util, temp))
        return out

    def process_memory(self, pids: set[int]) -> dict[int, int]:
        """Device index -> bytes of GPU memory that processes in ``pids`` hold there."""
        nvml, out = self._nvml, {}
        for i, h in enumerate(self._handles):
            try:
                procs = nvml.nvmlDeviceGetComputeRunningProcesses(h)
            except nvml.NVMLError:
                continue
            used = sum(int(p.usedGpuMemory or 0) for p in procs if p.pid in pids)
            if used:
                out[i] = used
        return out

    def close(self) -> None:
        with contextlib.suppress(self._nvml.NVMLError):
            self._nvml.nvmlShutdown()
