"""The node agent's GPU path, against NVIDIA's own library: wherever a driver is present,
the agent's discovery and health say what NVML says of every device (name, UUID, total
memory, compute capability, driver and CUDA versions; free memory within what changes
between two reads). Skipped on a host without an NVIDIA driver (the suite never needs a
GPU); run it on one with ``pytest tests/integration/test_node_gpu.py -s``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neutrino.node.gpu import driver_present
from tests.support.node import NodeAgent

pytestmark = [
    pytest.mark.skipif(not driver_present(), reason="no NVIDIA driver on this host"),
    pytest.mark.timeout(120),
]


def test_discovery_and_health_say_what_nvml_says(tmp_path: Path) -> None:
    import pynvml

    pynvml.nvmlInit()
    try:
        count = pynvml.nvmlDeviceGetCount()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]

        def text(value: object) -> str:
            return value.decode() if isinstance(value, bytes) else str(value)

        expected = [
            {
                "index": i,
                "name": text(pynvml.nvmlDeviceGetName(h)),
                "uuid": text(pynvml.nvmlDeviceGetUUID(h)),
                "vram_total_mb": pynvml.nvmlDeviceGetMemoryInfo(h).total >> 20,
                "compute_capability": "{}.{}".format(*pynvml.nvmlDeviceGetCudaComputeCapability(h)),
            }
            for i, h in enumerate(handles)
        ]
        driver = text(pynvml.nvmlSystemGetDriverVersion())
        free = [pynvml.nvmlDeviceGetMemoryInfo(h).free >> 20 for h in handles]
    finally:
        pynvml.nvmlShutdown()
    agent = NodeAgent(tmp_path, "127.0.0.1", name="gpu-node", budget="1G").start()
    try:
        status, discovery = agent.call("GET", "/discovery")
        assert status == 200
        print("\n/discovery:", json.dumps(discovery, indent=2))
        assert discovery["devices"] == expected
        assert discovery["driver_version"] == driver and discovery["cuda_version"]
        status, health = agent.call("GET", "/health")
        print("/health:", json.dumps(health, indent=2))
        assert [d["index"] for d in health["devices"]] == list(range(count))
        for device, before in zip(health["devices"], free, strict=True):
            assert abs(device["vram_free_mb"] - before) < 1024
            assert 0.0 <= device["utilization"] <= 1.0 and 0 < device["temperature_c"] < 120
    finally:
        agent.stop()
