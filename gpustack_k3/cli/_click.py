"""The click command and group classes every gpustack-k3 command uses (``cls=``): click's own, through its public
API only, defined in cli/main.py beside the one handler that ends every command (a group's subcommands and subgroups
are of these classes too, so a behaviour every command must share has one place to go)."""
from __future__ import annotations

from gpustack_k3.cli.main import Command, Group

__all__ = ["Command", "Group"]
