"""Environment variables read as the engine release reads them: one reader for both engines, driven by data.

Which parser a variable has in a release is catalog data (``traits.env_parsers`` of each version in
``catalog/data/engines/*.yaml``: variable -> parser name); the parsers themselves are the few shapes the releases
use, each written once here with the release line it copies and a CEL regular expression that admits exactly the
values it reads as on (so the CRD's CEL and the CLI agree on every spelling):

- vLLM ``envs.py`` builds each variable with its own lambda: ``.strip().lower() in ("1", "true")``
  (VLLM_ALLOW_LONG_MAX_MODEL_LEN, envs.py:1115-1118@0.33.0), ``env_with_choices`` (the raw string, checked
  case-sensitively against its choices: VLLM_ALL2ALL_BACKEND, envs.py:236-271,1240-1246@0.11.0), ``bool(int(...))`` (VLLM_USE_V1, envs.py:900-901@0.11.0;
  VLLM_KIMI_K3_AUX_ATTN_RES_STREAM, envs.py:1664-1666@0.33.0), ``maybe_convert_bool`` = ``bool(int(v))`` or None
  when unset (VLLM_USE_V2_MODEL_RUNNER, envs.py:360-363,2149-2151@0.33.0), ``== "1"``;
- SGLang ``environ.py`` declares typed fields: ``EnvBool`` (``value.lower()`` in true/1/yes/y -> True, in
  false/0/no/n -> False, anything else warns and gives the default, environ.py:67-86,143-150@0.5.23), ``EnvInt``,
  ``EnvStr``.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG, ENGINE_VLLM

_WS = "[ \\t\\n\\r\\f\\v]*"   # str.strip()'s ASCII whitespace, spelled so RE2 (Kubernetes) and Python read it alike


def _ci(word: str) -> str:
    """A case-insensitive spelling of ``word`` as a character-class regex (RE2 and Python alike, no inline flags)."""
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in word)


class Parser:
    """One way a release turns an environment string into a value. ``read`` gives the value the engine uses, None
    where the engine uses its default (unset, or a value it cannot read); ``on_regex`` (where the value is a switch)
    matches exactly the strings read as on."""

    __slots__ = ("name", "read", "on_regex", "source")

    def __init__(self, name: str, read: Callable[[str], Any], on_regex: str | None, source: str) -> None:
        self.name, self.read, self.on_regex, self.source = name, read, on_regex, source


def _strip_lower_1_true(v: str) -> bool:
    return v.strip().lower() in ("1", "true")


def _int_bool(v: str) -> bool | None:
    try:
        return bool(int(v))
    except ValueError:
        return None      # the engine raises when it reads the variable; not a value this reader can decide


def _env_bool(v: str) -> bool | None:
    low = v.lower()
    if low in ("true", "1", "yes", "y"):
        return True
    if low in ("false", "0", "no", "n"):
        return False
    return None          # warns, then the field's default


def _env_int(v: str) -> int | None:
    try:
        return int(v)
    except ValueError:
        return None


PARSERS: dict[str, Parser] = {p.name: p for p in (
    Parser("vllm_strip_lower_1_true", _strip_lower_1_true, f"^{_WS}(1|{_ci('true')}){_WS}$",
           "vllm envs.py:1115-1118@0.33.0"),
    # int() accepts surrounding whitespace, a sign and digit underscores: the regex admits the usual non-zero forms
    Parser("vllm_int_bool", _int_bool, f"^{_WS}[+]?0*[1-9][0-9_]*{_WS}$", "vllm envs.py:360-363,1664-1666@0.33.0"),
    Parser("vllm_eq_1", lambda v: v == "1", "^1$", "vllm envs.py:778-780@0.33.0"),
    # env_with_choices (case_sensitive=True): the value as written; one outside the choices is refused by envs.py
    # itself when the variable is read (a rule comparing against the choices leaves that case to the release)
    Parser("vllm_str", lambda v: v, None, "vllm envs.py:236-271,1240-1246@0.11.0"),
    Parser("sglang_env_bool", _env_bool, f"^({_ci('true')}|1|{_ci('yes')}|{_ci('y')})$",
           "sglang environ.py:143-150@0.5.23"),
    Parser("sglang_env_int", _env_int, None, "sglang environ.py:153-158@0.5.23"),
    Parser("sglang_env_str", lambda v: v, None, "sglang environ.py:128-130@0.5.23"),
)}

# the variables the rules read (a test holds every release's catalog entry to declaring their parsers)
READ_BY_RULES: dict[str, tuple[str, ...]] = {
    ENGINE_VLLM: ("VLLM_ALLOW_LONG_MAX_MODEL_LEN",),   # and per release: VLLM_USE_V2_MODEL_RUNNER, VLLM_USE_V1, ...
    ENGINE_SGLANG: ("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "SGLANG_IS_IN_CI"),
}


class UndeclaredEnvError(LookupError):
    """A variable whose parser the release's catalog entry does not declare (for the CRD's CEL: a catalog bug)."""


def parser_of(version: Any, name: str) -> Parser:
    """The parser the release ``version`` (catalog EngineVersion) reads ``name`` with."""
    p = declared_parser(version, name)
    if p is None:
        raise UndeclaredEnvError(f"{getattr(version, 'engine', '?')} {getattr(version, 'key', '?')}: no env_parsers "
                                 f"entry for {name} (catalog/data/engines/*.yaml)")
    return p


def declared_parser(version: Any, name: str) -> Parser | None:
    """The parser of ``name`` in the release's catalog entry; None where the release does not read the variable."""
    kind = ((version.traits.get("env_parsers") if version is not None else None) or {}).get(name)
    return PARSERS.get(kind) if kind is not None else None


def env_value(r: Any, name: str, env: dict[str, str] | None = None) -> Any:
    """The value the release reads from ``name`` in the document's environment (``env`` overrides where to look):
    None when unset, unreadable (the engine then uses its default) or not read by this release."""
    raw = (r.spec.env if env is None else env).get(name)
    p = declared_parser(r.version, name)
    if raw is None or p is None:   # unset, or a variable this release does not read
        return None
    return p.read(raw)


def env_on(r: Any, name: str, env: dict[str, str] | None = None) -> bool:
    """Whether the release reads ``name`` as on (a switch set to a value it reads as true)."""
    return env_value(r, name, env) is True
