"""The click command and group classes every gpustack-k3 command uses (``cls=``): click's own, through its public
API only. A group's subcommands and subgroups are of these classes too (``command_class``/``group_class``), so a
behaviour every command must share has one place to go."""
from __future__ import annotations

import click


class Command(click.Command):
    pass


class Group(click.Group):
    command_class = Command
    group_class = type      # a subgroup is of this group's class
