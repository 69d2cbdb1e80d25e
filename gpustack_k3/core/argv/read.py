"""Read an engine command line as the engine's own parser does, for one catalog engine version.

``read_argv`` returns every option the command line (and its ``--config`` file) set, with the engine's own
value conversion, and what the engine would refuse (an unknown or ambiguous flag, a bad value, a bad choice,
bad JSON, a broken config file) with the token it came from. Pure: the config file is read through the
``read_file`` callable the caller passes (the CLI reads the disk; tests pass a dict).
"""
from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from typing import Any

from gpustack_k3.catalog.loader import EngineEntry, EngineVersion
from gpustack_k3.core.argv import sglang as sglang_argv
from gpustack_k3.core.argv import vllm as vllm_argv
from gpustack_k3.core.argv.dumps import Option, ParserDump, Refused, version_dump
from gpustack_k3.core.argv.engine_types import build_type
from gpustack_k3.core.argv.parser import build_parser


class Refusal:
    """One thing the engine's parser would refuse, and where (plain: docs/architecture.md, Start-up)."""

    __slots__ = ("where", "flag", "message", "token")

    def __init__(self, where: str, flag: str | None, message: str, token: str | None = None) -> None:
        self.where = where       # "argv[3]", or "argv --config FILE" for a token that came from the file
        self.flag = flag         # the option concerned, as the engine names it
        self.message = message
        self.token = token       # an unrecognized token, as argparse received it

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Refusal) and (self.where, self.flag, self.message, self.token) == (
            other.where, other.flag, other.message, other.token)

    __hash__ = None   # mutable, compared by value

    def __repr__(self) -> str:
        return f"Refusal({self.where!r}, {self.flag!r}, {self.message!r}, {self.token!r})"


class Given:
    """One option the command line set."""

    __slots__ = ("dest", "option", "raw", "value", "origin")

    def __init__(self, dest: str, option: str | None, raw: list[str], value: Any, origin: Any) -> None:
        self.dest = dest
        self.option = option     # the option string argparse matched (None for the positional model)
        self.raw = raw           # the value strings it received
        self.value = value       # the value after the engine's conversion (for repeated options: the final one)
        self.origin = origin     # index into the argv, or "--config FILE"

    def __repr__(self) -> str:
        return f"Given({self.dest!r}, {self.option!r}, {self.raw!r}, {self.value!r}, {self.origin!r})"


class Reading:
    """What a command line set (dest -> last setting, in first-given order), its model, what the engine would
    refuse, and what argparse left over (as it received them)."""

    __slots__ = ("dump", "given", "model", "refusals", "unrecognized")

    def __init__(self, dump: ParserDump) -> None:
        self.dump = dump
        self.given: dict[str, Given] = {}
        self.model: str | None = None
        self.refusals: list[Refusal] = []
        self.unrecognized: list[str] = []

    @property
    def accepted(self) -> bool:
        return not self.refusals


def strip_command(engine: EngineEntry, version: EngineVersion | None, argv: list[str]) -> list[str]:
    """Drop a leading executable: ``vllm serve``, ``python3 -m MODULE`` and the like."""
    a = list(argv)
    if a and a[0].rsplit("/", 1)[-1] == "vllm" and len(a) > 1 and a[1] == "serve":
        return a[2:]
    if a and a[0].rsplit("/", 1)[-1].startswith("python") and len(a) > 2 and a[1] == "-m":
        return a[3:]
    return a


def _serve(engine: EngineEntry, version: EngineVersion | None) -> bool:
    """vLLM versions started as ``vllm serve`` (a subcommand: the model is positional) vs. an entry module."""
    cmd = (version.command if version and version.command else None) or engine.command
    return engine.engine == "vllm" and cmd[:2] == ["vllm", "serve"]


def _where(origin: Any) -> str:
    return f"argv[{origin}]" if isinstance(origin, int) and origin >= 0 else f"argv {origin}" if origin else "argv"


def _no_file(path: str) -> str:
    raise Refused(f"--config {path}: no file reader given", flag="--config")


def read_argv(engine: EngineEntry, version: EngineVersion, argv: list[str], *,
              read_file: Callable[[str], str] = _no_file, model_optional: bool = True) -> Reading:
    """Read ``argv`` (with or without its executable) as ``version``'s parser does.
    ``model_optional``: a command line pasted without its model is read anyway."""
    dump = version_dump(version)
    if dump is None:
        raise ValueError(f"{engine.engine} {version.key}: the catalog names no parser dump for this version")
    toks = strip_command(engine, version, argv)
    reading = Reading(dump=dump)
    try:
        if engine.engine == "vllm":
            d = vllm_argv.dialect(dump.code)
            serve = _serve(engine, version)
            # the option strings of the parser that reads a config file (vllm serve: the top-level one, empty)
            registered = set() if serve else dump.option_strings
            args, origins = vllm_argv.preprocess(d, toks, serve=serve, read_file=read_file, registered=registered,
                                                 model_optional=model_optional)
        else:
            sglang_argv.check_code(dump.code)
            args, origins = sglang_argv.preprocess(dump, toks, read_file)
    except Refused as exc:
        reading.refusals.append(Refusal(_locate(toks, exc, None), exc.flag, exc.message))
        return reading
    ns = argparse.Namespace(_k3_given=[])
    parser = build_parser(dump, model_optional=model_optional, for_args=args)
    parser._k3_action = None
    try:
        ns, extras = parser.parse_known_args(args, ns)
    except argparse.ArgumentError as exc:
        flag = exc.argument_name.split("/", 1)[0] if exc.argument_name else None
        reading.refusals.append(Refusal(_locate_flag(args, origins, dump, flag), flag, str(exc)))
        extras = []
    except Refused as exc:
        reading.refusals.append(Refusal(_locate_flag(args, origins, dump, exc.flag), exc.flag, exc.message))
        extras = []
    except (TypeError, ValueError, AssertionError, RecursionError) as exc:   # the engine's type or action raises
        action = parser._k3_action
        flag = action.option_strings[0] if action is not None and action.option_strings else None
        reading.refusals.append(Refusal(_locate_flag(args, origins, dump, flag), flag,
                                        f"{type(exc).__name__}: {str(exc)[:300]} (the engine would exit with a traceback)"))
        extras = []
    label = f"{engine.engine} {version.key}" + (f" (the {dump.version} parser)" if dump.version != version.key else "")
    used: set[int] = set()
    prev: tuple[int, Refusal] | None = None     # an unrecognized flag: the bare token after it is its value
    for tok in extras:
        i = next((i for i, a in enumerate(args) if a == tok and i not in used), None)
        if i is not None:
            used.add(i)
        if prev is not None and i is not None and i == prev[0] + 1 and not tok.startswith("-"):
            r = prev[1]
            reading.refusals[-1] = Refusal(r.where, r.flag, f"{r.message} with its value {tok!r}", r.token)
            reading.unrecognized.append(tok)
            prev = None
            continue
        where = _where(origins[i]) if i is not None else "argv"
        if tok.startswith("-"):
            r = Refusal(where, tok.split("=", 1)[0],
                        f"unrecognized argument {tok!r} (not an option of {label})", tok)
        else:
            r = Refusal(where, None, f"unrecognized argument {tok!r} (not a flag and not the value of one)", tok)
        reading.refusals.append(r)
        reading.unrecognized.append(tok)
        prev = (i, r) if tok.startswith("-") and "=" not in tok and i is not None else None
    _collect(reading, ns, args, origins, serve=engine.engine == "vllm" and _serve(engine, version))
    return reading


def _collect(reading: Reading, ns: argparse.Namespace, args: list[str], origins: list, *, serve: bool) -> None:
    dump = reading.dump
    positions = _option_positions(args)
    seen: dict[str, int] = {}
    positional = None
    for dest, option, raw, value in getattr(ns, "_k3_given", []):
        if option is None:                      # the positional model (vllm serve MODEL)
            if raw:
                positional = value
            continue
        pos = positions.get((option, seen.get(option, 0)))
        origin = origins[pos] if pos is not None else None
        seen[option] = seen.get(option, 0) + 1
        g = reading.given.get(dest)
        if g is None:
            reading.given[dest] = Given(dest, option, list(raw), value, origin)
        else:                                   # a later setting overrides: keep the first-given order
            g.option, g.raw, g.value, g.origin = option, list(raw), value, origin
    model_dest = "model_path" if dump.engine == "sglang" else "model"
    if model_dest in reading.given:
        reading.model = reading.given.pop(model_dest).value
    # `vllm serve MODEL`: the positional wins (entrypoints/cli/serve.py cmd@0.33.0); the API-server entry point
    # (launchers/api_server/entry.py@0.32.0) parses a positional model_tag but serves --model
    if serve and positional is not None:
        reading.model = positional


def _option_positions(args: list[str]) -> dict[tuple[str, int], int]:
    """(option string as typed before '=', nth occurrence) -> index in args (for the origin of a value)."""
    out: dict[tuple[str, int], int] = {}
    counts: dict[str, int] = {}
    for i, a in enumerate(args):
        if a.startswith("-"):
            name = a.split("=", 1)[0]
            out[(name, counts.get(name, 0))] = i
            counts[name] = counts.get(name, 0) + 1
    return out


def _locate(toks: list[str], exc: Refused, origin: Any) -> str:
    if exc.flag:
        for i, t in enumerate(toks):
            if t.split("=", 1)[0].replace("_", "-") == exc.flag or t == exc.flag:
                return f"argv[{i}]"
    return _where(origin)


def _locate_flag(args: list[str], origins: list, dump: ParserDump, flag: str | None) -> str:
    """The token an argparse error names: the last one whose option resolves to ``flag``'s action."""
    if not flag:
        return "argv"
    target = dump.flag(flag)
    for i in range(len(args) - 1, -1, -1):
        name = args[i].split("=", 1)[0]
        if name == flag or (target is not None and dump.flag(name) is target) or (
                target is not None and name.startswith("--") and len(name) > 2
                and [o for o in target.flags if o.startswith(name)] and _unique_prefix(dump, name) is target):
            return _where(origins[i])
    return f"argv {flag}"


def _unique_prefix(dump: ParserDump, name: str) -> Option | None:
    hits = dump.prefixed(name)
    return dump.option(next(iter(hits))) if len(hits) == 1 else None


# ------------------------------------------------------------------ canonical form of what was given

def render_given(opt: Option, g: Given) -> list[str]:
    """Tokens that set ``opt`` to ``g.value`` in the engine's canonical spelling (its first option string),
    so two spellings of one setting give the same tokens. A value whose rendering does not convert back to
    itself through the engine's type keeps its raw strings."""
    flag, v = opt.canonical, g.value
    if opt.kind in ("store_true", "store_false", "store_const", "append_const"):
        return [flag]
    if opt.kind == "count":
        return [flag] * int(v or 0)
    if opt.kind == "boolean_optional":
        if v:
            return [flag]
        neg = "--no-" + flag[2:]
        return [neg if neg in opt.negative else sorted(opt.negative)[0]]
    if opt.kind == "append":
        return [t for item in (v or []) for t in (flag, _render_value(opt, item, None))]
    if opt.nargs in (None, "?"):
        if opt.nargs == "?" and not g.raw:
            return [flag]
        return [flag, _render_value(opt, v, g.raw[-1] if g.raw else None)]
    items = v if isinstance(v, list) else [v]
    raws = g.raw if len(g.raw) == len(items) else [None] * len(items)
    return [flag, *(_render_value(opt, item, raw) for item, raw in zip(items, raws))]


@functools.lru_cache(maxsize=512)
def _type_fn(desc_json: str):
    import json

    return build_type(json.loads(desc_json))


def _render_value(opt: Option, v: Any, raw: str | None) -> str:
    import json

    if isinstance(v, bool):
        text = "True" if v else ""
    elif v is None:
        text = "None"
    elif isinstance(v, (dict, list)):
        text = json.dumps(v, sort_keys=True, separators=(",", ":"))
    elif isinstance(v, float):
        text = repr(v)
    else:
        text = str(v)
    if opt.type_desc is None:
        return text
    fn = _type_fn(json.dumps(opt.type_desc, sort_keys=True))
    try:
        if fn(text) == v:
            return text
    except (ValueError, TypeError, argparse.ArgumentTypeError):
        pass
    return raw if raw is not None else text
