"""SGLang's command line before argparse sees it: only ``--config FILE.yaml``.

SGLang parses with a plain ``argparse.ArgumentParser`` (srt/server_args.py prepare_server_args@0.5.23): no
underscore rewriting, no dotted keys; argparse's own prefix abbreviations apply. ``--config`` (the exact
token) is merged by ConfigArgumentMerger (srt/utils/server_args_config_parser.py@0.5.23): the file's keys
become ``--key value`` tokens placed BEFORE the whole command line (the command line overrides the file); the
key is used as written (``tp_size:`` gives ``--tp_size``, which argparse refuses); a boolean is ``--key`` for a
store_true option (nothing when false), else ``--key true|false``; a list is ``--key item...``; a mapping is
JSON; an option whose action takes no single value (``--no-x`` pairs, deprecated switches, list actions) is
refused in a file.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import PurePosixPath

from gpustack_k3.core.argv.dumps import Option, ParserDump, Refused
from gpustack_k3.core.argv.engine_types import UnknownEngineCode

# source hashes (prepare_server_args, ConfigArgumentMerger) this module reproduces
KNOWN_CODE = {("2ff6edd617a8", "c5e6c3808522")}


def check_code(code: dict[str, str]) -> None:
    if (code.get("prepare_server_args"), code.get("ConfigArgumentMerger")) not in KNOWN_CODE:
        raise UnknownEngineCode(f"SGLang config merging code {code}: read it in the wheel and update "
                                "gpustack_k3/core/argv/sglang.py")


def _keys(o: Option) -> set[str]:
    return {o.dest} | {f[2:].replace("-", "_") for f in o.flags if f.startswith("--")}


def _supported(o: Option) -> bool:
    """argparse's own store_true or store action, or any action with nargs None (the dump's raw action kind:
    a custom action class is neither _StoreAction nor _StoreTrueAction)."""
    return o.action_desc in ("store_true", "store") or o.nargs is None


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
    store_true = {k for o in dump.options if o.action_desc == "store_true" for k in _keys(o)}
    supported = {k for o in dump.options if _supported(o) for k in _keys(o)}
    unsupported = {k: o for o in dump.options if not _supported(o) and o.action_desc != "help"
                   and "--config" not in o.flags for k in _keys(o) if k not in supported}
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
