"""Paths shared by the static checks of the images and the kind e2e."""
from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OPERATOR_DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
ENGINE_DOCKERFILE = REPO / "e2e" / "images" / "vllm-cpu" / "Dockerfile"
BUILD_SH = REPO / "e2e" / "images" / "build.sh"
RUN_SH = REPO / "e2e" / "kind" / "run.sh"
LWS_SH = REPO / "e2e" / "kind" / "lws.sh"
KIND_DIR = REPO / "e2e" / "kind"
KIND_CR = KIND_DIR / "smollm2-cpu.yaml"
SETUP_VLLM_CPU = REPO / ".ci" / "setup_vllm_cpu.sh"
INSTALL_YAML = REPO / "manifests" / "install.yaml"
CHART = REPO / "charts" / "gpustack-k3"
SCRIPTS = (RUN_SH, BUILD_SH, LWS_SH)
