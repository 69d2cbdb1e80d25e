"""Findings that only show up when a launch spec is projected onto a target (storage mostly): the render
family of the rule registry (``gpustack_k3/core/rules/render.py``), re-exported for the render package."""
from __future__ import annotations

from gpustack_k3.core.rules.render import render_findings

__all__ = ["render_findings"]
