"""The click command and group classes every gpustack-k3 command uses (``cls=``): click's own, with one
wasted step of its option parser removed.

click looks a single-dash token such as ``-o`` up as a long option first; the ``NoSuchOption`` that lookup
raises is caught and discarded, and the token goes on to the short options. Building that discarded error
imports difflib and computes "did you mean" suggestions over every long option (click/parser.py
``_process_opts``, click/exceptions.py ``NoSuchOption``@8.4.0): 3.6 M instructions of a 702 M
``validate ... -o json`` (callgrind, 2026-12-01). Here that lookup fails without suggestions when click would
discard it (validate: 702.2 -> 699.6 M, this module's own import included); every token parses as before,
and an unknown ``--`` option still gets its suggestions (tested).
"""
from __future__ import annotations

import click
import click.parser

# Command.make_parser's parser: private since click 8.2, public (OptionParser) in 8.1
_ClickOptionParser = getattr(click.parser, "_OptionParser", None) or click.parser.OptionParser


class _OptionParser(_ClickOptionParser):
    def _match_long_opt(self, opt, explicit_value, state):
        if opt not in self._long_opt and opt[:2] not in self._opt_prefixes:
            # discarded by _process_opts (-o is a short option): no message to translate either
            raise click.NoSuchOption(opt, message=opt, ctx=self.ctx)
        return super()._match_long_opt(opt, explicit_value, state)


class _Parsing:
    def make_parser(self, ctx: click.Context):
        # click's Command.make_parser, with the parser above
        parser = _OptionParser(ctx)
        for param in self.get_params(ctx):
            param.add_to_parser(parser, ctx)
        return parser


class Command(_Parsing, click.Command):
    pass


class Group(_Parsing, click.Group):
    command_class = Command
    group_class = type      # a subgroup is of this group's class
