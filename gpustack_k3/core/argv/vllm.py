"""vLLM's FlexibleArgumentParser.parse_args before argparse sees the command line, re-implemented per version.

What it does (vllm/utils/argparse_utils.py FlexibleArgumentParser.parse_args, _pull_args_from_config and
load_config_file @0.28.0..0.33.0; vllm/utils/__init__.py @0.11.0), in order:
1. ``vllm serve``: ``--model X`` moves to the positional model (0.11.0 refuses it instead); a
   ``--served-model-name`` without a positional model and without ``--config`` is refused.
2. ``--config FILE.yaml`` (the exact token): the file's keys become ``--key value`` tokens inserted after the
   model (or first, for the API-server entry point), so the command line overrides the file. True booleans
   are ``--key``; false ones ``--no-key`` only if the *calling* parser registered that string (for
   ``vllm serve`` the top-level ``vllm`` parser, which has none: a false boolean in the file is dropped);
   lists are ``--key item...``; mappings are JSON (0.11.0: Python ``str()``).
3. In every ``--`` token, underscores become dashes in the name part (up to the first ``.`` and ``=``).
4. ``-O3`` / ``-O=3`` / ``-O 3`` become ``--optimization-level 3`` (0.11.0: ``-O.level=3``, i.e.
   ``--compilation-config {"level": 3}``).
5. ``--a.b.c v`` / ``--a.b=v`` / ``--a.b+ v1,v2`` (any token starting with ``-`` that has a ``.``) are
   collected into one JSON object per option, appended at the end (so they override an earlier ``--a {...}``
   as a whole); a value is JSON if it parses, else (0.28.0+) a human-readable integer (``80g``), else the
   string.
Steps 3-5 keep, for every resulting token, where it came from (the user's token index, or the config file).
"""
from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from typing import Any

from gpustack_k3.core.argv.dumps import Refused
from gpustack_k3.core.argv.engine_types import UnknownEngineCode, _vllm_human_readable_int

Origin = Any   # int (index into the user's argv) or str (a --config file key)


class Dialect:
    """How one release's FlexibleArgumentParser rewrites a command line before argparse reads it
    (plain: docs/architecture.md, Start-up)."""

    __slots__ = ("name", "optimization", "dotted_human_int", "serve_model_flag", "config_false", "config_dict",
                 "source")

    def __init__(self, name: str, optimization: str, dotted_human_int: bool, serve_model_flag: str,
                 config_false: str, config_dict: str, source: str) -> None:
        self.name = name
        # "--optimization-level" (0.28+) or "-O.level" (0.11.0: a compilation config key)
        self.optimization = optimization
        self.dotted_human_int = dotted_human_int  # dotted values fall back to human_readable_int (0.28+)
        self.serve_model_flag = serve_model_flag  # "move" (0.28+) or "refuse" (0.11.0)
        # "no-flag": --no-key if the calling parser registered it; "skip": dropped
        self.config_false = config_false
        self.config_dict = config_dict            # "json" (0.28+) or "str" (0.11.0)
        self.source = source

    def __repr__(self) -> str:
        return f"Dialect({self.name!r})"


_D028 = Dialect("flexible-0.28", "--optimization-level", True, "move", "no-flag", "json",
                "vllm/utils/argparse_utils.py FlexibleArgumentParser@0.28.0..0.33.0")
_D011 = Dialect("flexible-0.11", "-O.level", False, "refuse", "skip", "str",
                "vllm/utils/__init__.py FlexibleArgumentParser@0.11.0")

# source hash of FlexibleArgumentParser.parse_args / _pull_args_from_config / load_config_file in a dump
# (tools/engine_parsers/describe.py src_hash) -> the dialect that reproduces it
DIALECTS: dict[tuple[str, str, str], Dialect] = {
    ("06d2a12341f9", "174e85e1f5a7", "5f8e700ae1d2"): _D028,   # 0.33.0
    ("62dbf68760a4", "17a3f184f8a0", "5f8e700ae1d2"): _D028,   # 0.28.0
    # 0.29.0: 0.33.0's parse_args with 0.28.0's _pull_args_from_config. parse_args differs from 0.28.0's only by
    # the `--task` hint it adds to an error message (_show_serve_task_hint, argparse_utils.py:266-268@0.29.0);
    # _pull_args_from_config from 0.33.0's only by `vllm snapshot create` (not a serving command)
    ("06d2a12341f9", "17a3f184f8a0", "5f8e700ae1d2"): _D028,   # 0.29.0
    ("0d12f3f5e2cc", "9e30eee1fc17", "4a2478325e6c"): _D011,   # 0.11.0
}


def dialect(code: dict[str, str]) -> Dialect:
    key = (code.get("parse_args", ""), code.get("_pull_args_from_config", ""), code.get("load_config_file", ""))
    if key not in DIALECTS:
        raise UnknownEngineCode(f"FlexibleArgumentParser code {key}: read it in the wheel and add a dialect "
                                "to gpustack_k3/core/argv/vllm.py")
    return DIALECTS[key]


def _dashed(token: str) -> str:
    """``re.sub(r"(?<=--)[^\\.]*", lambda m: m.group(0).replace("_", "-"), token, count=1)`` (argparse_utils.py
    parse_args@0.33.0): underscores become dashes after the first ``--``, up to the first ``.``."""
    start = token.find("--")
    if start < 0:
        return token
    start += 2
    end = token.find(".", start)
    end = len(token) if end < 0 else end
    return token[:start] + token[start:end].replace("_", "-") + token[end:]


def _config_args(d: Dialect, path: str, read_file: Callable[[str], str], registered: set[str]) -> list[str]:
    """load_config_file: the YAML file as --key value tokens."""
    import yaml

    ext = path.split(".")[-1]
    if ext not in ("yaml", "yml"):
        raise Refused(f"Config file must be of a yaml/yml type. {ext} supplied", flag="--config")
    text = read_file(path)
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise Refused(f"--config {path}: not valid YAML: {exc}", flag="--config") from None
    if not isinstance(config, dict):
        raise Refused(f"--config {path}: {type(config).__name__} has no attribute 'items' (the file must be a "
                      "mapping of option: value)", flag="--config")
    out: list[str] = []
    for key, value in config.items():
        key = str(key)
        if isinstance(value, bool):
            if value:
                out.append("--" + key)
            elif d.config_false == "no-flag" and f"--no-{key}" in registered:
                out.append(f"--no-{key}")
        elif isinstance(value, list):
            if value:
                out += ["--" + key, *(str(item) for item in value)]
        elif isinstance(value, dict):
            out += ["--" + key, json.dumps(value) if d.config_dict == "json" else str(value)]
        else:
            out += ["--" + key, str(value)]
    return out


def _matches(token: str, flag: str) -> bool:
    """``re.match(rf"^{flag}(=.+|$)", token)`` as vLLM writes it (argparse_utils.py parse_args@0.33.0), without
    compiling a pattern per process: the flag, then nothing (or only a final newline: ``$``), or ``=`` and a
    character other than a newline."""
    if not token.startswith(flag):
        return False
    rest = token[len(flag):]
    return rest in ("", "\n") or (len(rest) > 1 and rest[0] == "=" and rest[1] != "\n")


Tokens = tuple[list[str], list[Origin]]   # tokens and, for each, where it came from


def preprocess(d: Dialect, argv: list[str], *, serve: bool, read_file: Callable[[str], str],
               registered: set[str], model_optional: bool) -> tuple[list[str], list[Origin]]:
    """The tokens argparse receives (after ``serve``, i.e. for the serve subparser) and where each came from: the
    steps of the module docstring, in order."""
    args: list[str] = (["serve"] if serve else []) + list(argv)
    origins: list[Origin] = ([-1] if serve else []) + list(range(len(argv)))
    if serve:
        args, origins = _serve_model(d, args, origins, model_optional)
    if "--config" in args:
        args, origins = _splice_config(d, args, origins, serve=serve, read_file=read_file, registered=registered,
                                       model_optional=model_optional)
    if serve:
        args, origins = args[1:], origins[1:]
    return _collect_dotted(d, *_respell(d, args, origins))


def _serve_model(d: Dialect, args: list[str], origins: list[Origin], model_optional: bool) -> Tokens:
    """Step 1 (``vllm serve``): ``--model X`` moved to the positional model (or refused), and a
    ``--served-model-name`` without a model refused."""
    model_idx = next((i for i, a in enumerate(args) if _matches(a, "--model")), None)
    if model_idx is not None:
        if d.serve_model_flag == "refuse" and args[model_idx] == "--model":
            raise Refused("With `vllm serve`, you should provide the model as a positional argument or in a "
                          "config file instead of via the `--model` option.", flag="--model")
        if d.serve_model_flag == "move":
            if args[model_idx] == "--model":
                if model_idx + 1 >= len(args):
                    raise Refused("IndexError: --model without a value", flag="--model")
                tag, rest = args[model_idx + 1], model_idx + 2
            else:
                tag, rest = args[model_idx].removeprefix("--model="), model_idx + 1
            args = ["serve", tag, *args[1:model_idx], *args[rest:]]
            origins = [-1, origins[model_idx], *origins[1:model_idx], *origins[rest:]]
    if (d.serve_model_flag == "move" and len(args) > 1 and args[1].startswith("-")
            and not any(_matches(a, "--config") for a in args)
            and any(_matches(a, f"--served{s1}model{s2}name") for a in args for s1 in "-_" for s2 in "-_")
            and not model_optional):
        raise Refused("`model` should be provided as the first positional argument when using `vllm serve`.",
                      flag="--served-model-name")
    return args, origins


def _splice_config(d: Dialect, args: list[str], origins: list[Origin], *, serve: bool,
                   read_file: Callable[[str], str], registered: set[str], model_optional: bool) -> Tokens:
    """Step 2: the ``--config FILE`` tokens replaced by the file's, after the model (first for the API server)."""
    if args.count("--config") > 1:
        raise Refused("More than one config file specified!", flag="--config")
    index = args.index("--config")
    if index == len(args) - 1:
        raise Refused("No config file specified! Please check your command-line arguments.", flag="--config")
    path = args[index + 1]
    # for `vllm serve` the file is read by the top-level `vllm` parser (cli/main.py), which registers no
    # --no-X: the caller passes no registered strings then
    config = _config_args(d, path, read_file, registered)
    corig: list[Origin] = [f"--config {path}"] * len(config)
    if args[0].startswith("-"):
        head = 0
    elif serve:
        model_in_cli = len(args) > 1 and not args[1].startswith("-")
        if not model_in_cli and "--model" not in config and not model_optional:
            raise Refused("No model specified! Please specify model either as a positional argument or in a "
                          "config file.", flag="--config")
        head = 2 if model_in_cli else 1
    else:
        head = 1
    return (args[:head] + config + args[head:index] + args[index + 2:],
            origins[:head] + corig + origins[head:index] + origins[index + 2:])


def _respell(d: Dialect, args: list[str], origins: list[Origin]) -> Tokens:
    """Steps 3 and 4: underscores to dashes in ``--`` names; ``-O3`` / ``-O=3`` / ``-O 3`` as the release writes
    the optimization level."""
    processed: list[str] = []
    porig: list[Origin] = []
    for i, arg in enumerate(args):
        toks = _respelled(d, arg, args[i + 1] if i + 1 < len(args) else None)
        processed += toks
        porig += [origins[i]] * len(toks)
    return processed, porig


def _respelled(d: Dialect, arg: str, following: str | None) -> list[str]:
    if arg.startswith("--"):
        if "=" in arg:
            key, value = arg.split("=", 1)
            return [_dashed(key) + "=" + value]
        return [_dashed(arg)]
    if d.optimization == "--optimization-level" and arg.startswith("-O") and arg != "-O":
        return ["--optimization-level", arg[3:] if arg[2] == "=" else arg[2:]]
    if d.optimization == "-O.level" and arg.startswith("-O") and arg != "-O" and arg[2] != ".":
        return [f"-O.level={arg[3:] if arg[2] == '=' else arg[2:]}"]
    if arg == "-O" and following in {"0", "1", "2", "3"}:
        return [d.optimization]
    return [arg]


def _collect_dotted(d: Dialect, processed: list[str], porig: list[Origin]) -> Tokens:
    """Step 5: every dotted option (``--a.b v``, ``--a.b=v``, ``--a.b+ v1,v2``) collected into one JSON object per
    option, appended at the end."""
    delete: set[int] = set()
    dict_args: dict[str, dict[str, Any]] = {}
    dict_orig: dict[str, Origin] = {}
    for i, parg in enumerate(processed):
        if i in delete or not parg.startswith("-") or "." not in parg:
            continue
        read = _dotted_option(parg, processed, i)
        if read is None:
            continue
        parg, value_str, consumed = read
        if consumed:
            delete.add(i + 1)
        if parg.endswith("+"):
            parg = parg[:-1]
            value_str = json.dumps(list(value_str.split(",")))
        key, *keys = parg.split(".")
        nested: Any = _dotted_value(d, value_str)
        for k in reversed(keys):
            nested = {k: nested}
        _merge(dict_args.setdefault(key, {}), nested)
        dict_orig.setdefault(key, porig[i])
        delete.add(i)
    out = [a for i, a in enumerate(processed) if i not in delete]
    oorig = [o for i, o in enumerate(porig) if i not in delete]
    for key, value in dict_args.items():
        out += [key, json.dumps(value)]
        oorig += [dict_orig[key], dict_orig[key]]
    return out, oorig


def _dotted_option(parg: str, processed: list[str], i: int) -> tuple[str, str, bool] | None:
    """(option, value text, whether the value is the next token) of a dotted token; None when the dot is only in
    its ``=`` value. Refuses what the release cannot read (a negative decimal, a last token without a value)."""
    if _NEGATIVE_DECIMAL.match(parg):
        raise Refused(_negative_decimal(parg, processed[i - 1] if i else None), flag=parg)
    if "=" in parg:
        opt, value_str = parg.split("=", 1)
        return (opt, value_str, False) if "." in opt else None
    if i + 1 >= len(processed):
        raise Refused(f"IndexError: {parg} has no value (list index out of range)", flag=parg)
    return parg, processed[i + 1], True


_NEGATIVE_DECIMAL = re.compile(r"^-\d*\.\d*(?:[eE][-+]?\d+)?$")


def _negative_decimal(token: str, before: str | None) -> str:
    """Why vLLM refuses a negative decimal written as the token after its flag (``--x -0.5``)."""
    flag = before.split("=", 1)[0] if before and before.startswith("-") and "=" not in before else None
    way = f"write it attached to its flag: {flag}={token}" if flag else f"write it attached to its flag: --FLAG={token}"
    return (f"{token!r}: vLLM's pre-parse reads every token that starts with '-' and holds a '.' as a dotted option "
            f"(utils/argparse_utils.py:462-491@0.33.0), so {token} is not taken as the value of "
            f"{flag or 'the flag before it'}: the engine takes the next token as its value, or exits with an IndexError "
            f"when it is the last one; {way}")


def _dotted_value(d: Dialect, value_str: str) -> Any:
    try:
        return json.loads(value_str)
    except json.JSONDecodeError:
        pass
    except RecursionError:
        raise Refused("RecursionError: a dotted value nests too deeply") from None
    if d.dotted_human_int:
        try:
            return _vllm_human_readable_int("kmgtKMGT")(value_str)
        except (ValueError, argparse.ArgumentTypeError):
            pass
    return value_str


def _merge(original: dict, update: dict) -> None:
    """recursive_dict_update: nested mappings merge, lists extend, anything else is replaced."""
    for k, v in update.items():
        if isinstance(v, dict) and isinstance(original.get(k), dict):
            _merge(original[k], v)
        elif isinstance(v, list) and isinstance(original.get(k), list):
            original[k] += v
        else:
            original[k] = v
