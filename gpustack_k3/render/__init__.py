"""Render targets: every channel is a projection of one LaunchSpec through templates/ (Jinja2).

Submodules import only the standard library at import time; jinja2, yaml, kubernetes-validate and
docker are imported inside the functions that need them.
"""
from gpustack_k3.render.argv import argv_document, shell_command
from gpustack_k3.render.checks import render_findings
from gpustack_k3.render.docker import docker_run_line, docker_run_params
from gpustack_k3.render.kubernetes import (
    kubernetes_yaml,
    render_kubernetes,
    validate_objects,
    workload_kind,
)
from gpustack_k3.render.targets import TARGETS, prepare, render_all, render_target
from gpustack_k3.render.templates import RenderError
from gpustack_k3.render.writer import write_files

__all__ = [
    "TARGETS", "RenderError", "argv_document", "docker_run_line", "docker_run_params",
    "kubernetes_yaml", "prepare", "render_all", "render_findings", "render_kubernetes", "render_target",
    "shell_command", "validate_objects", "workload_kind", "write_files",
]
