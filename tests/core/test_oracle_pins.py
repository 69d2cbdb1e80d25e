"""The wheel's exact pins (gpustack_k3/oracle/wheels.py pinned_versions): what the torch-version double of the engine
oracle answers (gpustack_k3/oracle/engine_side/doubles.py torch_version)."""
from __future__ import annotations

import zipfile

from gpustack_k3.oracle import wheels


def test_only_exact_unconditional_pins_are_taken(tmp_path):
    w = tmp_path / "vllm-0.11.0-cp38-abi3-manylinux1_x86_64.whl"
    with zipfile.ZipFile(w, "w") as zf:
        zf.writestr("vllm-0.11.0.dist-info/METADATA", "\n".join([
            "Name: vllm",
            "Requires-Dist: transformers>=4.55.2",
            "Requires-Dist: torch==2.8.0",
            "Requires-Dist: torchaudio (==2.8.0)",
            "Requires-Dist: xformers==0.0.32; platform_system == 'Linux'",
            "Requires-Dist: flashinfer-python==0.3.1; extra == \"flashinfer\"",
            "Requires-Dist: numba==0.61.*",
        ]))
    pins = wheels.pinned_versions(w)
    assert pins["torch"] == "2.8.0" and pins["torchaudio"] == "2.8.0"
    assert "transformers" not in pins and "flashinfer-python" not in pins
    assert wheels.required_versions(w)["transformers"] == "4.55.2"
