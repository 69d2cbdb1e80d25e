"""An argparse parser rebuilt from a parser dump: the engine's option strings, actions, nargs, types (the
engine's own type functions, re-implemented in engine_types.py) and choices, so argparse itself decides
abbreviations, ``--k=v``, nargs, negative numbers and the order of errors as the engine's parser does.
"""
from __future__ import annotations

import argparse
import functools
from collections.abc import Sequence
from typing import Any

from gpustack_k3.core.argv import engine_types as et
from gpustack_k3.core.argv.dumps import ParserDump, Refused, load_dump

_KIND_ACTIONS = {"store": "store", "store_true": "store_true", "store_false": "store_false",
                 "store_const": "store_const", "append": "append", "append_const": "append_const",
                 "count": "count", "extend": "extend", "boolean_optional": argparse.BooleanOptionalAction}


class _Parser(argparse.ArgumentParser):
    """argparse with the engine's options; errors raise instead of exiting; every value an action receives
    is recorded (``namespace._k3_given``: dest, option string, raw strings, converted value) in order."""

    def error(self, message):
        raise Refused(message)

    def _get_formatter(self):
        # add_argument builds a help formatter per option only to check its metavar against nargs
        # (argparse.py@3.11); we never print help, so every parser shares one formatter that does only that
        return _METAVAR_CHECK

    def _get_values(self, action, arg_strings):
        self._k3_raw, self._k3_action = list(arg_strings), action
        return super()._get_values(action, arg_strings)


class _MetavarCheck(argparse.HelpFormatter):
    """The one use a parser here has for a formatter: ``add_argument`` calls ``_format_args`` to check that
    a metavar tuple fits nargs, which reads only the action. HelpFormatter's own ``__init__`` (asking the
    terminal its size, compiling two patterns) is skipped: this formatter formats no help."""

    def __init__(self) -> None:   # deliberately not HelpFormatter.__init__
        pass


_METAVAR_CHECK = _MetavarCheck()


class _PrintsAndExits(argparse.Action):
    """--help / --version: the engine prints and exits; that is not a serving command line."""

    def __init__(self, option_strings, dest, **kw):
        super().__init__(option_strings, dest, nargs=0)

    def __call__(self, parser, namespace, values, option_string=None):
        raise Refused(f"{option_string} prints the engine's help or version and exits: not a serving command line",
                      flag=option_string)


def _tracking(cls: type) -> type:
    class Tracked(cls):
        def __call__(self, parser, namespace, values, option_string=None):
            super().__call__(parser, namespace, values, option_string)
            namespace._k3_given.append((self.dest, option_string, getattr(parser, "_k3_raw", []),
                                        getattr(namespace, self.dest, None)))

    Tracked.__name__ = cls.__name__
    return Tracked


_TRACKED: dict[Any, type] = {}


def _action_class(p: argparse.ArgumentParser, kind_or_cls: Any) -> type:
    """The recording subclass of an action class, or of the class ``p`` registers for an action name (looked up
    in the parser being built: a throwaway ArgumentParser per name cost more than the rest of a small build)."""
    if kind_or_cls not in _TRACKED:
        base = kind_or_cls if isinstance(kind_or_cls, type) else p._registry_get("action", kind_or_cls, kind_or_cls)
        _TRACKED[kind_or_cls] = _tracking(base)
    return _TRACKED[kind_or_cls]


def build_parser(dump: ParserDump, *, model_optional: bool = True, for_args: Sequence[str] | None = None) -> _Parser:
    """An argparse parser behaving as the engine's for every option of the dump. ``model_optional``: a
    command line pasted without its model is read anyway (the engine would refuse a missing required
    ``--model-path``). ``for_args``: only the options these argument strings can reach (:func:`reachable`):
    argparse then matches, abbreviates and refuses each of them exactly as the whole parser does, and a
    command line of ten flags does not pay for building three hundred actions (most of a CLI call's reading)."""
    keep = None if for_args is None else reachable(dump, for_args)
    return _build_parser(dump.path, model_optional, keep)


def reachable(dump: ParserDump, args: Sequence[str]) -> frozenset[int]:
    """Indices (into the dump's options) of every option argparse could select for ``args``: argparse looks an
    option token up exactly, then before its ``=``, then as a prefix of option strings, and a single-dash
    token also as its first two characters plus an attached value (``_parse_optional`` / ``_get_option_tuples``,
    argparse.py@3.11). A single-dash token can also be combined short flags (``-xy``: each looked up by its two
    characters), so with one in ``args`` every single-dash option is kept; without one none is reachable (a
    ``--`` token looks up only ``--`` strings). Kept always: the options every parse needs
    (``dump.always_reachable``: required, or spelled like a negative number)."""
    prefixes = set()
    single_dash = False
    for a in args:
        if len(a) > 1 and a[0] == "-" and a != "--":   # '--' ends the options; it is never looked up
            if a[1] == "-":
                prefixes.add(a.split("=", 1)[0])
            else:
                single_dash = True
    keep = set(dump.always_reachable)
    if single_dash:
        keep |= dump.short
    for pre in prefixes:
        keep |= dump.prefixed(pre)
    return frozenset(keep)


@functools.lru_cache(maxsize=64)
def _build_parser(path: str, model_optional: bool, keep: frozenset[int] | None) -> _Parser:
    dump = load_dump(path)
    p = _Parser(prog=dump.engine, add_help=False, allow_abbrev=dump.allow_abbrev, exit_on_error=False)
    for entry in dump.positionals:
        p.add_argument(entry["dest"], nargs=entry.get("nargs"), type=et.build_type(entry.get("type")),
                       default=None, action=_action_class(p, "store"))
    for i in range(len(dump)) if keep is None else sorted(keep):   # the engine's order
        entry, opt = dump.entry(i), dump.option(i)
        kw: dict[str, Any] = {"dest": opt.dest, "default": opt.default}
        action = entry["action"]
        if action in ("help", "version"):
            kw["action"] = _action_class(p, _PrintsAndExits)
        elif isinstance(action, dict):
            known = et.ACTIONS.get(action["custom"])
            if known is None or action.get("src") not in known[0]:
                raise et.UnknownEngineCode(f"action {action['custom']} (source hash {action.get('src')})")
            cls = known[1]
            kw["action"] = _action_class(p, cls)
            if cls is et.EnableDisableAction:
                kw["negative"] = opt.negative
            elif cls is et.VllmLoRAModules:
                ref = (action.get("refs") or {}).get("LoRAModulePath") or {}
                kw["fields"], kw["required_fields"] = ref.get("fields", ()), ref.get("required", ())
            elif cls is et.StoreConstValue:
                kw["const_value"] = action.get("const_value")
            if cls is not et.EnableDisableAction:
                kw["nargs"] = entry.get("nargs")
                kw["type"] = et.build_type(entry.get("type"))
                if entry.get("choices") is not None:
                    kw["choices"] = entry["choices"]
        else:
            kw["action"] = _action_class(p, _KIND_ACTIONS[action])
            if action in ("store", "append", "extend"):
                kw["nargs"] = entry.get("nargs")
                kw["type"] = et.build_type(entry.get("type"))
                if "const" in entry:
                    kw["const"] = entry["const"]
            elif action in ("store_const", "append_const"):
                kw["const"] = entry.get("const")
            if entry.get("choices") is not None and action not in ("store_true", "store_false", "count"):
                kw["choices"] = entry["choices"]
        if opt.required and not (model_optional and opt.dest in ("model_path", "model")):
            kw["required"] = True
        # BooleanOptionalAction makes its --no- strings itself; every other action gets all registered strings
        # (for vLLM's EnableDisableAction the hidden --no-enable-x too: argparse_utils.py _register_action@0.33.0)
        names = [f for f in opt.flags if f not in opt.negative] if action == "boolean_optional" else list(opt.flags)
        p.add_argument(*names, **kw)
    return p
