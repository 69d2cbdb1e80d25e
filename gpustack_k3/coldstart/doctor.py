"""Log doctor: the log checks of the rule registry (``gpustack_k3/core/rules``) over what the tracker saw.

The patterns the tracker scans for are ``data/doctor.yaml``, keyed by rule id; what a rule concludes from its
hits (and its severity, fix and source) is its one definition in the registry.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from gpustack_k3.core.findings import Finding
from gpustack_k3.core.rules import log as log_rules

from .scanner import iso

if TYPE_CHECKING:
    from .tracker import ColdStartTracker


def diagnose(tr: ColdStartTracker) -> list[Finding]:
    return log_rules.diagnose(tr, iso)
