"""SGLang's command line before argparse sees it: only ``--config FILE.yaml``.

SGLang parses with a plain ``argparse.ArgumentParser`` (srt/server_args.py prepare_server_args@0.5.22..0.5.23):
no underscore rewriting, no dotted keys; argparse's own prefix abbreviations apply. ``--config`` (the exact
token) is merged by ConfigArgumentMerger (srt/utils/server_args_config_parser.py): the file's keys become
``--key value`` tokens placed BEFORE the whole command line (the command line overrides the file); the key is
used as written (``tp_size:`` gives ``--tp_size``, which argparse refuses); a boolean is ``--key`` for a
store_true option (nothing when false), else ``--key true|false``; a list is ``--key item...``; a mapping is
JSON; an option whose action the merger does not support is refused in a file. The releases differ in which
keys and actions that covers (``Merger``).
"""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import PurePosixPath

from gpustack_k3.core.argv.dumps import Option, ParserDump, Refused
from gpustack_k3.core.argv.engine_types import UnknownEngineCode


class Merger:
    """How one release's ConfigArgumentMerger.__init__ classifies the parser's actions
    (plain: docs/architecture.md, Start-up)."""

    __slots__ = ("every_spelling", "single_value", "source")

    def __init__(self, every_spelling: bool, single_value: bool, source: str) -> None:
        # 0.5.23 (_config_keys): a key may be the dest or any long spelling (dashes as underscores), and a key
        # some supported action also reads stays usable; 0.5.22: the dest only, and an unsupported action's dest
        # is refused even when a supported action shares it
        self.every_spelling = every_spelling
        # 0.5.23 (_takes_one_value): store_true, store, or any action with nargs None; 0.5.22: store_true and store
        self.single_value = single_value
        self.source = source

    def __repr__(self) -> str:
        return f"Merger({self.source!r})"


_M0523 = Merger(True, True, "srt/utils/server_args_config_parser.py:17-66@0.5.23")
_M0522 = Merger(False, False, "srt/utils/server_args_config_parser.py:17-49@0.5.22")

# source hashes (prepare_server_args, ConfigArgumentMerger) -> the merger that reproduces them
KNOWN_CODE = {("2ff6edd617a8", "c5e6c3808522"): _M0523, ("2ff6edd617a8", "b2a0c85d9ba0"): _M0522}


def merger(code: dict[str, str]) -> Merger:
    key = (code.get("prepare_server_args"), code.get("ConfigArgumentMerger"))
    if key not in KNOWN_CODE:
        raise UnknownEngineCode(f"SGLang config merging code {code}: read it in the wheel and update "
                                "gpustack_k3/core/argv/sglang.py")
    return KNOWN_CODE[key]


def check_code(code: dict[str, str]) -> None:
    merger(code)


def _is(o: Option, kind: str) -> bool:
    """isinstance(action, argparse's class for ``kind``): the plain action, or a custom subclass of it."""
    a = o.action_desc
    return a == kind or (isinstance(a, dict) and a.get("base") == kind)


def _keys(o: Option, m: Merger) -> set[str]:
    if not m.every_spelling:
        return {o.dest}
    return {o.dest} | {f[2:].replace("-", "_") for f in o.flags if f.startswith("--")}


def _supported(o: Option, m: Merger) -> bool:
    if _is(o, "store_true") or _is(o, "store"):
        return True
    return m.single_value and o.nargs is None


def _classify(dump: ParserDump, m: Merger) -> tuple[set[str], set[str]]:
    """(keys of store_true options, keys the merger refuses)."""
    store_true = {k for o in dump.options if _is(o, "store_true") for k in _keys(o, m)}
    supported = {k for o in dump.options if _supported(o, m) for k in _keys(o, m)} if m.every_spelling else set()
    unsupported = {k for o in dump.options if not _supported(o, m) and o.action_desc != "help"
                   and not {"--config", "--help", "-h"} & set(o.flags) for k in _keys(o, m) if k not in supported}
    return store_true, unsupported


def preprocess(dump: ParserDump, argv: list[str], read_file: Callable[[str], str]) -> tuple[list[str], list]:
    args, origins = list(argv), list(range(len(argv)))
    idx = [i for i, a in enumerate(args) if a == "--config"]
    if not idx:
        return args, origins
    if len(idx) > 1:
        raise Refused("Multiple config files specified! Only one allowed.", flag="--config")
    index = idx[0]
    if index == len(args) - 1:
        raise Refused("No config file specified after --config flag!", flag="--config")
    path = args[index + 1]
    if PurePosixPath(path).suffix.lower() not in (".yaml", ".yml"):
        raise Refused(f"Config file must be YAML format, got: {PurePosixPath(path).suffix}", flag="--config")
    import yaml

    try:
        config = yaml.safe_load(read_file(path))
    except yaml.YAMLError as exc:
        raise Refused(f"--config {path}: not valid YAML: {exc}", flag="--config") from None
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise Refused("Config file must contain a dictionary at root level", flag="--config")
    store_true, unsupported = _classify(dump, merger(dump.code))
    out: list[str] = []
    for key, value in config.items():
        key = str(key)
        norm = key.replace("-", "_")
        if norm in unsupported:
            raise Refused(f"Unsupported config option '{norm}' in --config {path}", flag="--config")
        if isinstance(value, bool):
            if norm in store_true:
                out += [f"--{key}"] if value else []
            else:
                out += [f"--{key}", str(value).lower()]
        elif isinstance(value, list):
            if value:
                out += [f"--{key}", *(str(item) for item in value)]
        elif isinstance(value, dict):
            out += [f"--{key}", json.dumps(value)]
        else:
            out += [f"--{key}", str(value)]
    corig = [f"--config {path}"] * len(out)
    return out + args[:index] + args[index + 2:], corig + origins[:index] + origins[index + 2:]
