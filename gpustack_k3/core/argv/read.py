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

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG, ENGINE_VLLM
from gpustack_k3.catalog.loader import EngineEntry, EngineVersion
from gpustack_k3.core.argv import sglang as sglang_argv
from gpustack_k3.core.argv import vllm as vllm_argv
from gpustack_k3.core.argv.dumps import Option, ParserDump, Refused, version_dump
from gpustack_k3.core.argv.engine_types import build_type
from gpustack_k3.core.argv.parser import build_parser, reachable


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
    return engine.engine == ENGINE_VLLM and cmd[:2] == ["vllm", "serve"]


def _where(origin: Any) -> str:
    return f"argv[{origin}]" if isinstance(origin, int) and origin >= 0 else f"argv {origin}" if origin else "argv"


def _no_file(path: str) -> str:
    raise Refused(f"--config {path}: no file reader given", flag="--config")


def read_argv(engine: EngineEntry, version: EngineVersion, argv: list[str], *,
              read_file: Callable[[str], str] = _no_file, model_optional: bool = True,
              collapse: bool = True) -> Reading:
    """Read ``argv`` (with or without its executable) as ``version``'s parser does.
    ``model_optional``: a command line pasted without its model is read anyway. ``collapse``: overridden
    repeats of single-value options are not handed to argparse (:func:`_collapse`: the same reading in linear
    time); False hands argparse every token (the reference the tests compare the collapsed reading with)."""
    dump = version_dump(version)
    if dump is None:
        raise ValueError(f"{engine.engine} {version.key}: the catalog names no parser dump for this version")
    toks = strip_command(engine, version, argv)
    reading = Reading(dump=dump)
    try:
        if engine.engine == ENGINE_VLLM:
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
    full_args, full_origins = args, origins     # every token: where an unrecognized one came from
    if collapse:
        args, origins = _collapse(dump, args, origins)
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
    # each unrecognized token is the first not yet claimed occurrence of its text in the whole line (the
    # occurrences of one text are claimed in order: one pass, not one scan per token)
    occurrences: dict[str, list[int]] = {}
    for i, a in enumerate(full_args):
        occurrences.setdefault(a, []).append(i)
    claimed: dict[str, int] = {}
    prev: tuple[int, Refusal] | None = None     # an unrecognized flag: the bare token after it is its value
    args, origins, collapsed_args, collapsed_origins = full_args, full_origins, args, origins
    for tok in extras:
        k = claimed.get(tok, 0)
        at = occurrences.get(tok, ())
        i = at[k] if k < len(at) else None
        if i is not None:
            claimed[tok] = k + 1
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
    _collect(reading, ns, collapsed_args, collapsed_origins, serve=engine.engine == ENGINE_VLLM and _serve(engine, version))
    return reading


# argparse actions whose occurrence sets one attribute from its own tokens only, so a later occurrence of the
# same action replaces it entirely (argparse.py@3.11 _StoreAction, _StoreTrue/FalseAction, _StoreConstAction,
# BooleanOptionalAction); never append/count/extend (they accumulate), nargs other than a single value, or an
# engine's own action class
_COLLAPSIBLE = frozenset({"store", "store_true", "store_false", "store_const", "boolean_optional"})
_SPANNING = ("...", "A...")      # argparse.REMAINDER, argparse.PARSER: a pattern that swallows option tokens


def _collapse(dump: ParserDump, args: list[str], origins: list) -> tuple[list[str], list]:
    """``args`` without the repeats argparse would overwrite, and their origins (so every refusal still names
    the token of the whole line). argparse looks for the next option token from the start of the option list
    at every option (``_parse_known_args``, argparse.py@3.11 line 2091): 20,000 repeated flags cost it 30 s.

    What is dropped: within a run of consecutive *simple* occurrences (each an exact option string of a
    :data:`_COLLAPSIBLE` action, with its value as ``--flag=value`` or as the next token when that does not
    start with ``-``; nothing of the line before a ``--``), every occurrence of an action but its first and
    last one. Why the reading is the same: each simple occurrence was read alone by the same parser without a
    refusal (its value converts and is a valid choice; conversion is a pure function of the token), so in the
    run argparse refuses nothing, leaves nothing over and consumes exactly these tokens; a run starts and ends
    at option tokens, so what precedes and follows it (positionals, the values of other options, unrecognized
    tokens) is matched as before; no option or positional of the dump swallows option tokens (checked, else
    nothing is dropped); the last occurrence of each action still sets its value, the first one still fixes
    the first-given order, and every dropped token has a later kept token of the same action (for the token an
    argparse error is located at)."""
    opts = [dump.option(i) for i in reachable(dump, args)]
    if any(o.nargs in _SPANNING for o in opts) or any(p.get("nargs") in _SPANNING for p in dump.positionals):
        return args, origins
    end = args.index("--") if "--" in args else len(args)
    # (start, stop, option) of each simple occurrence, in order
    occ: list[tuple[int, int, Any]] = []
    verified: dict[tuple[str, ...], bool] = {}
    i = 0
    while i < end:
        tok = args[i]
        o = dump.flag(tok) if tok[:1] == "-" else None
        if o is not None:
            if isinstance(o.action_desc, str) and o.action_desc in _COLLAPSIBLE:
                if o.action_desc != "store":
                    occ.append((i, i + 1, o))
                elif o.nargs is None and i + 1 < end and args[i + 1][:1] != "-":
                    occ.append((i, i + 2, o))
        elif "=" in tok and tok[:1] == "-":
            o = dump.flag(tok.split("=", 1)[0])
            if o is not None and o.action_desc == "store" and o.nargs is None:
                occ.append((i, i + 1, o))
        i = occ[-1][1] if occ and occ[-1][0] == i else i + 1
    if len(occ) < 3:
        return args, origins
    drop: set[int] = set()
    run: list[tuple[int, int, Any]] = []
    for item in [*occ, None]:
        if item is not None and _reads_alone(dump, args[item[0]:item[1]], item[2], verified) and (
                not run or run[-1][1] == item[0]):
            run.append(item)
            continue
        drop |= _middles(run)
        run = [item] if item is not None and _reads_alone(dump, args[item[0]:item[1]], item[2], verified) else []
    if not drop:
        return args, origins
    keep = [j for j in range(len(args)) if j not in drop]
    return [args[j] for j in keep], [origins[j] for j in keep]


def _middles(run: list[tuple[int, int, Any]]) -> set[int]:
    """Token indices of every occurrence in ``run`` but each action's first and last."""
    by_action: dict[int, list[tuple[int, int]]] = {}
    for start, stop, o in run:
        by_action.setdefault(id(o), []).append((start, stop))
    return {j for spans in by_action.values() for start, stop in spans[1:-1] for j in range(start, stop)}


def _reads_alone(dump: ParserDump, tokens: list[str], opt: Option, verified: dict[tuple[str, ...], bool]) -> bool:
    """Whether the parser reads ``tokens`` (one occurrence of ``opt``) alone without a refusal, leaving
    nothing over and setting ``opt`` once (argparse itself, through its public parse_known_args)."""
    key = tuple(tokens)
    if key not in verified:
        p = build_parser(dump, model_optional=True, for_args=[tokens[0].split("=", 1)[0]])
        ns = argparse.Namespace(_k3_given=[])
        try:
            ns, extras = p.parse_known_args(list(tokens), ns)
            given = [g for g in ns._k3_given if g[1] is not None]
            verified[key] = not extras and len(given) == 1 and given[0][0] == opt.dest
        except Exception:   # noqa: BLE001 - anything the engine would refuse or raise: not collapsed
            verified[key] = False
    return verified[key]


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
    model_dest = "model_path" if dump.engine == ENGINE_SGLANG else "model"
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
        text = _render_value(opt, v, g.raw[-1] if g.raw else None)
        # a value starting with '-' is attached to its flag: as a token of its own argparse may take it for an
        # option, and vLLM's pre-parse reads a '-' token holding a '.' (-1.0) as a dotted option
        # (utils/argparse_utils.py:462-491@0.33.0), so the engine would not read the value
        return [f"{flag}={text}"] if text.startswith("-") else [flag, text]
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
