"""Spec fields <-> engine flags, driven by the catalog's flag tables (catalog/data/engines/*.yaml).

``render_args`` turns a resolved spec into an argv list; ``parse_argv`` does the reverse for
``check-args`` and ``import``. Both read the same table, so they cannot drift apart.
"""
from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from typing import Any

from gpustack_k3.catalog.loader import DATA, EngineEntry, FlagSpec
from gpustack_k3.core.errors import InputError
from gpustack_k3.core.launch_types import Arg
from gpustack_k3.core.resolve import Resolved, get_path


def _compact(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return repr(v)
    return str(v)


def speculative_json(r: Resolved) -> dict[str, Any]:
    s = r.spec.speculative
    keys = r.engine.speculative["json_keys"]
    methods = r.engine.speculative["methods"]
    out: dict[str, Any] = {}
    for fld, key in keys.items():
        v = getattr(s, fld)
        if fld == "method":
            v = methods.get(s.method, s.method)
        if v is not None:
            out[key] = v
    out.update(s.extraConfig)
    return out


def _speculative_args(r: Resolved) -> list[str]:
    s = r.spec.speculative
    if s.method == "none":
        return []
    sp = r.engine.speculative
    if r.engine.engine == "vllm":
        return ["--speculative-config", _compact(speculative_json(r))]
    args = ["--speculative-algorithm", sp["methods"].get(s.method, s.method)]
    if s.draftModel:
        args += [sp["draft_path_flag"], s.draftModel]
    if s.numTokens is not None:
        args += [sp["block_size_flag"].get(s.method, sp["num_tokens_flag"]), str(s.numTokens)]
    return args


def eplb_json(engine: EngineEntry, eplb: Any) -> dict[str, Any]:
    """``--eplb-config`` of a ``spec.parallel.eplb`` (only the fields set; the rest are the engine's defaults)."""
    keys = engine.topology.get("eplb_json_keys", {})
    return {key: getattr(eplb, fld) for fld, key in keys.items() if getattr(eplb, fld, None) is not None}


def eplb_args(engine: EngineEntry, eplb: Any, flag: str) -> list[str]:
    """``--enable-eplb`` (+ ``--eplb-config JSON`` when a field is set) for a present ``spec.parallel.eplb``."""
    if eplb is None:
        return []
    cfg = eplb_json(engine, eplb)
    on = [] if eplb.enabled is False else [flag]
    return [*on, engine.topology["eplb_config_flag"], _compact(cfg)] if cfg else on


def render_args(r: Resolved) -> list[Arg]:
    """The engine arguments of a resolved spec, one :class:`Arg` per field that emits tokens, in the flag
    table's order (the positional model path first, the spec's extraArgs last)."""
    out: list[Arg] = []
    if r.model_arg == "positional":
        out.append(Arg("model.path", [r.model_path], platform=True))
    elif not any(f.field == "model.path" for f in r.engine.flags):
        out.append(Arg("model.path", [r.engine.model_flag, r.model_path], platform=True))
    for f in r.engine.flags:
        if f.field == "model.path":
            toks = [f.flag, r.model_path] if r.model_arg == "flag" else []
        elif f.kind == "speculative":
            toks = _speculative_args(r)
        elif f.kind == "eplb":
            toks = eplb_args(r.engine, r.spec.parallel.eplb, f.flag)
        else:
            toks = _flag_tokens(f, get_path(r.spec, f.field))
        if toks:
            out.append(Arg(f.field, list(toks), platform=f.platform or f.field == "model.path"))
    if r.spec.extraArgs:
        out.append(Arg("extraArgs", list(r.spec.extraArgs)))
    return out


def _flag_tokens(f: FlagSpec, v: Any) -> list[str]:
    if v is None:
        return []
    if f.kind == "bool_optional":
        return [f.flag] if v else ["--no-" + f.flag[2:]]
    if f.kind == "store_true":
        return [f.flag] if v else []
    if f.kind == "store_false":
        return [] if v else [f.flag]
    if f.kind == "json":
        return [f.flag, _compact(v)]
    return [f.flag, _fmt(v)]


# ---------------------------------------------------------------- argv -> spec

@dataclass
class ParsedArgv:
    spec: dict[str, Any] = field(default_factory=dict)   # nested camelCase spec fragment
    extra_args: list[str] = field(default_factory=list)
    model_path: str | None = None
    seen_flags: list[str] = field(default_factory=list)
    eplb_enabled: bool = False         # --enable-eplb was given
    eplb_config_seen: bool = False     # --eplb-config was given (without --enable-eplb: EPLB stays off)


def _set(d: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    for p in parts[:-1]:
        d = d.setdefault(p, {})
    d[parts[-1]] = value


def flag_index(e: EngineEntry) -> dict[str, tuple[FlagSpec, Any]]:
    """Every flag string of the typed fields (aliases and ``--no-`` forms included) -> (its FlagSpec, the
    value implied when the flag takes no value)."""
    idx: dict[str, tuple[FlagSpec, Any]] = {}
    for f in e.flags:
        for name in (f.flag, *f.aliases):
            idx[name] = (f, None)
            if f.kind == "bool_optional":
                idx["--no-" + name[2:]] = (f, False)
    return idx


def speculative_subflags(e: EngineEntry) -> dict[str, str]:
    """SGLang's speculative flags besides --speculative-algorithm -> the spec.speculative field they set."""
    if e.engine != "sglang":
        return {}
    sp = e.speculative
    return {sp["draft_path_flag"]: "draftModel", sp["num_tokens_flag"]: "numTokens",
            **{v: "numTokens" for v in sp["block_size_flag"].values()}}


def strip_command(engine: EngineEntry, argv: list[str]) -> list[str]:
    """Drop a leading executable: ``vllm serve``, ``python3 -m sglang.launch_server`` and the like."""
    a = list(argv)
    if a and a[0].rsplit("/", 1)[-1] == "vllm" and len(a) > 1 and a[1] == "serve":
        return a[2:]
    if a and a[0].rsplit("/", 1)[-1].startswith("python") and len(a) > 2 and a[1] == "-m":
        return a[3:]
    return a


BOOL_WORDS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False,
              "off": False}


def _short(raw: str, n: int = 80) -> str:
    return repr(raw) if len(raw) <= n else repr(raw[:n]) + f"... ({len(raw)} characters)"


def _convert(f: FlagSpec, raw: str, flag: str) -> Any:
    try:
        if f.kind == "json":
            v = json.loads(raw)
            if not isinstance(v, dict):
                raise ValueError("not a JSON object")
            return v
        if f.type == "int":
            return int(raw)
        if f.type == "float":
            v = float(raw)
            if not math.isfinite(v):
                raise ValueError("not a finite number")
            return v
        return raw
    except (ValueError, RecursionError) as exc:
        raise InputError(f"argv {flag}", f"value {_short(raw)} is not a valid {f.kind if f.kind == 'json' else f.type}: {exc}",
                         f"give {flag} a {'JSON object' if f.kind == 'json' else f.type}") from None


def parse_argv(engine: EngineEntry, argv: list[str]) -> ParsedArgv:
    """Parse an engine command line into a spec fragment. Unknown flags go to extra args, in order."""
    out = ParsedArgv()
    toks = strip_command(engine, argv)
    idx = flag_index(engine)
    sp = engine.speculative
    spec_flags = speculative_subflags(engine)
    i = 0
    if toks and not toks[0].startswith("-") and engine.model_arg == "positional":
        out.model_path = toks[0]
        i = 1
    while i < len(toks):
        tok = toks[i]
        if not tok.startswith("-") or tok in ("-", "--"):
            raise InputError(f"argv[{i}]", f"unexpected token {tok!r}: not a flag and not the value of one",
                             "write flags as --flag value or --flag=value")
        name, eq, inline = tok.partition("=")
        name = sp.get("aliases", {}).get(name, name)

        def take_value() -> str:
            nonlocal i
            if eq:
                return inline
            if i + 1 >= len(toks):
                raise InputError(f"argv {name}", "flag needs a value and none follows", f"write {name} VALUE")
            i += 1
            return toks[i]

        out.seen_flags.append(name)
        if name in spec_flags:
            raw = take_value()
            if spec_flags[name] == "numTokens":
                try:
                    val: Any = int(raw)
                except ValueError:
                    raise InputError(f"argv {name}", f"value {raw!r} is not a valid int",
                                     f"give {name} a whole number") from None
            else:
                val = raw
            _set(out.spec, f"speculative.{spec_flags[name]}", val)
        elif name == engine.topology.get("eplb_config_flag"):
            raw = take_value()
            cfg = _convert(FlagSpec(field="parallel.eplb", flag=name, kind="json"), raw, name)
            inv = {v: k for k, v in engine.topology.get("eplb_json_keys", {}).items()}
            unknown = sorted(k for k in cfg if k.replace("-", "_") not in inv)
            if unknown:
                raise InputError(f"argv {name}", f"unknown EPLB config key(s) {', '.join(unknown)}",
                                 f"use {', '.join(sorted(inv))}")
            eplb = out.spec.setdefault("parallel", {}).setdefault("eplb", {})
            eplb.update({inv[k.replace("-", "_")]: v for k, v in cfg.items()})
            out.eplb_config_seen = True
        elif name in idx:
            f, implied = idx[name]
            if f.kind == "eplb":
                if eq and inline.lower() not in BOOL_WORDS:
                    raise InputError(f"argv {name}", f"value {inline!r} is not a boolean", f"write {name} alone")
                if not eq or BOOL_WORDS[inline.lower()]:
                    out.spec.setdefault("parallel", {}).setdefault("eplb", {})
                    out.eplb_enabled = True
            elif f.kind == "speculative":
                raw = take_value()
                _parse_speculative(engine, raw, name, out)
            elif f.kind in ("bool_optional", "store_true", "store_false"):
                if eq:
                    if inline.lower() not in BOOL_WORDS:
                        raise InputError(f"argv {name}", f"value {inline!r} is not a boolean",
                                         f"write {name}=true or {name}=false, or {name} alone")
                    val = BOOL_WORDS[inline.lower()]
                else:
                    val = True if implied is None else implied
                if f.kind == "store_false":
                    val = not val
                _set(out.spec, f.field, val)
            else:
                raw = take_value()
                v = _convert(f, raw, name)
                if f.field == "model.path":
                    out.model_path = v
                else:
                    _set(out.spec, f.field, v)
        else:
            out.extra_args.append(tok)
            if not eq and i + 1 < len(toks) and not toks[i + 1].startswith("--") and not _is_short_flag(toks[i + 1]):
                i += 1
                out.extra_args.append(toks[i])
        i += 1
    if out.model_path is not None:
        _set(out.spec, "model.path", out.model_path)
    if out.eplb_config_seen and not out.eplb_enabled:
        # --eplb-config without --enable-eplb: configured but off (config/parallel.py:586-591@0.33.0 then refuses
        # num_redundant_experts, rule eplb-redundant-needs-eplb)
        out.spec["parallel"]["eplb"]["enabled"] = False
    return out


def _is_short_flag(tok: str) -> bool:
    return tok.startswith("-") and len(tok) > 1 and not tok[1].isdigit() and tok[1] != "."


def _parse_speculative(engine: EngineEntry, raw: str, flag: str, out: ParsedArgv) -> None:
    sp = engine.speculative
    if engine.engine == "sglang":
        inv = {v.upper(): k for k, v in sp["methods"].items()}
        method = inv.get(raw.upper())
        if method is None:
            out.extra_args += [flag, raw]   # an algorithm we do not model: pass through, checked as unknown
            return
        _set(out.spec, "speculative.method", method)
        return
    try:
        cfg = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"argv {flag}", f"not valid JSON: {exc}", f"quote the JSON object given to {flag}") from None
    if not isinstance(cfg, dict):
        raise InputError(f"argv {flag}", "must be a JSON object", "e.g. '{\"method\":\"dspark\",...}'")
    inv_keys = {v: k for k, v in sp["json_keys"].items()}
    inv_methods = {v: k for k, v in sp["methods"].items()}
    spec: dict[str, Any] = {"extraConfig": {}}
    for k, v in cfg.items():
        k2 = k.replace("-", "_")   # arg_utils.py:2126-2128: dashes in JSON keys become underscores
        if k2 in inv_keys:
            fld = inv_keys[k2]
            if fld == "method" and not isinstance(v, str):
                raise InputError(f"argv {flag}", f"\"{k}\" must be a string, got {json.dumps(v)[:80]}",
                                 "e.g. \"method\": \"dspark\"")
            spec[fld] = inv_methods.get(v, v) if fld == "method" else v
        else:
            spec["extraConfig"][k2] = v
    if "method" not in spec:
        spec["method"] = "dspark" if "dspark" in str(cfg.get("model", "")).lower() else "ngram" if cfg.get("model") == "ngram" else "mtp"
    for k, v in spec.items():
        _set(out.spec, f"speculative.{k}", v)


@functools.lru_cache(maxsize=8)
def parser_options(rel_path: str) -> frozenset[str]:
    """Option strings (and aliases) from a parser dump in the catalog data directory."""
    d = json.loads((DATA / rel_path).read_text())
    opts = d["options"] if isinstance(d, dict) else {k: {} for k in d}
    return frozenset({*opts, *(a for v in opts.values() for a in v.get("aliases", []))})


def known_flags(r: Resolved) -> set[str]:
    """Every flag string the catalog knows for this engine version (typed fields + extra known flags)."""
    out: set[str] = {*flag_index(r.engine), *speculative_subflags(r.engine), *r.engine.speculative.get("aliases", {})}
    if r.version:
        out.update(r.version.extra_known_flags)
        if r.version.known_flags_file:
            out.update(parser_options(r.version.known_flags_file))
    out.update(r.engine.platform_flags)
    return out
