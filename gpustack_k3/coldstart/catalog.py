"""Marker catalog: engine log lines → phase events, loaded from ``data/*.yaml`` and validated.

Every marker names a literal ``key`` (searched at C speed over whole chunks), an optional
``regex`` applied to the matched line only (named groups become figures), the phase it belongs
to, what it means for that phase (``kind``), the version range it appears in and its source
(``file:line@version``). Each marker carries an ``example`` line that must match: the catalog
checks itself when it is loaded.
"""
from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources
from typing import Literal

import yaml
from packaging.version import InvalidVersion, Version
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from gpustack_k3.errors import CatalogError  # one class: the packaged data is broken (a developer error)
from gpustack_k3.core.rules.log import log_rule_engines

from .patterns import LinePattern
from .phases import LOG_PHASES

Kind = Literal["start", "end", "progress", "info", "fail", "cause", "request", "traceback"]
Engine = Literal["vllm", "sglang", "any"]

# Named groups with a meaning for the tracker; any other group is kept as a detail.
SPECIAL_GROUPS = {"version", "seconds", "engine_init", "tp", "reason", "error"}

# The engine's own memory figures a marker may state (``figures``), reported per attempt as ``memory``:
# the smallest value over the ranks that printed it (the engine sizes to its tightest rank).
FIGURES = {
    "kv_cache_gib": "KV cache memory, GiB (vLLM: available KV cache memory; SGLang: KV pool size)",
    "kv_cache_tokens": "KV cache capacity in tokens (vLLM: GPU/CPU KV cache size; SGLang: max_total_num_tokens)",
    "max_concurrency": "vLLM: maximum concurrency for concurrency_len-token requests (x)",
    "concurrency_len": "vLLM: the request length max_concurrency is stated for",
    "max_running_requests": "SGLang: max_running_requests",
    "context_len": "SGLang: context_len",
    "mamba_cache_size": "SGLang: max_mamba_cache_size (state slots)",
    "mamba_state_gib": "SGLang: Mamba/state pool, GiB (conv + ssm state)",
    "kv_cache_blocks": "vLLM V0: number of GPU KV cache blocks",
}


def _example_check(what: str, key: str, regex: str | None, example: str) -> None:
    """A pattern of the catalog carries a log line it must find: its key occurs in it, and its regex (if any)
    compiles and matches it."""
    if key not in example:
        raise ValueError(f"{what}: key {key!r} does not occur in its example")
    if regex is not None:
        try:
            rx = re.compile(regex)
        except re.error as exc:
            raise ValueError(f"{what}: regex does not compile: {exc}") from exc
        if not rx.search(example):
            raise ValueError(f"{what}: regex does not match its example")


class Marker(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    engine: Engine = "any"
    phase: str | None = None
    kind: Kind
    key: str = Field(min_length=3)
    regex: str | None = None
    since: str | None = None
    until: str | None = None
    source: str = Field(min_length=3)
    example: str
    detect: bool = True          # may this marker decide the engine when none is known yet?
    wrapper: bool = False        # fail/cause: a message about another failure (the cause is elsewhere)
    # the engine's own figures this line states: regex group -> figure name ("name+": summed over the
    # line's groups); the report's ``memory`` (gpustack_k3/coldstart/report.py FIGURES)
    figures: dict[str, str] = Field(default_factory=dict)
    cache: Literal["hit", "miss"] | None = None   # compile cache: compiled graphs loaded, or compiled
    sum_per_rank: bool = False   # engine seconds add up per rank (several captures per rank)
    draft: bool = False          # after this line the loader's lines describe the draft model (their seconds are its)
    pool: bool = False           # a KV pool line: the first pool's figures stand, each labelled pool in details.pools

    @field_validator("phase")
    @classmethod
    def _phase_known(cls, v: str | None) -> str | None:
        if v is not None and v not in LOG_PHASES:
            raise ValueError(f"unknown phase {v!r}; expected one of {', '.join(LOG_PHASES)}")
        return v

    @field_validator("since", "until")
    @classmethod
    def _version_ok(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                Version(v)
            except InvalidVersion as exc:
                raise ValueError(f"not a version: {v!r}") from exc
        return v

    @model_validator(mode="after")
    def _self_check(self) -> Marker:
        _example_check(f"marker {self.id}", self.key, self.regex, self.example)
        if self.kind in ("start", "end", "progress") and self.phase is None:
            raise ValueError(f"marker {self.id}: kind {self.kind} needs a phase")
        if self.wrapper and self.kind not in ("fail", "cause"):
            raise ValueError(f"marker {self.id}: only a fail or cause marker can be a wrapper")
        if self.figures:
            groups = set(re.compile(self.regex).groupindex) if self.regex else set()
            missing = sorted(set(self.figures) - groups)
            if missing:
                raise ValueError(f"marker {self.id}: figures name regex groups it does not have: {', '.join(missing)}")
            unknown = sorted({f.rstrip("+") for f in self.figures.values()} - set(FIGURES))
            if unknown:
                raise ValueError(f"marker {self.id}: unknown figures {', '.join(unknown)}; expected one of "
                                 f"{', '.join(FIGURES)}")
        return self

    def compiled(self) -> LinePattern | None:
        return LinePattern(self.regex) if self.regex is not None else None



class DoctorPattern(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    key: str = Field(min_length=2)
    regex: str | None = None
    example: str
    role: str = "hit"            # rule-specific meaning (e.g. "device", "enabled", "none")

    @model_validator(mode="after")
    def _self_check(self) -> DoctorPattern:
        _example_check(f"doctor pattern {self.key!r}", self.key, self.regex, self.example)
        return self


class DoctorRule(BaseModel):
    """The patterns of one rule of the registry (``gpustack_k3/core/rules``) whose log check reads them; the
    rule's metadata and what it concludes live in its one definition there."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str
    patterns: list[DoctorPattern] = Field(default_factory=list)


class CatalogFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    engine: Engine
    markers: list[Marker] = Field(default_factory=list)


class DoctorFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rules: list[DoctorRule]


class Catalog:
    """All markers and doctor rules, plus the keyword index used by the scanner."""

    def __init__(self, markers: list[Marker], rules: list[DoctorRule]):
        self.markers = markers
        self.rules = rules
        self.regex: dict[str, LinePattern | None] = {m.id: m.compiled() for m in markers}
        # keyword → consumers; a consumer is ("marker", Marker) or ("doctor", rule, pattern, regex, engines):
        # the engines whose logs the rule reads come from its one definition in the registry
        index: dict[str, list[tuple]] = {}
        for m in markers:
            index.setdefault(m.key, []).append(("marker", m, self.regex[m.id]))
        for r in rules:
            for p in r.patterns:
                index.setdefault(p.key, []).append(
                    ("doctor", r, p, LinePattern(p.regex) if p.regex else None, log_rule_engines(r.id)))
        self.keys: list[str] = sorted(index)
        self.consumers: list[list[tuple]] = [index[k] for k in self.keys]
        self.request_keys: list[str] = [k for k, cs in zip(self.keys, self.consumers)
                                         if all(c[0] == "marker" and c[1].kind == "request" for c in cs)]


def _load_yaml(name: str) -> dict:
    text = resources.files("gpustack_k3.coldstart").joinpath("data", name).read_text("utf-8")
    return yaml.safe_load(text)


@lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    markers: list[Marker] = []
    seen: set[str] = set()
    for name in ("common.yaml", "vllm.yaml", "sglang.yaml"):
        try:
            f = CatalogFile.model_validate(_load_yaml(name))
        except ValidationError as exc:
            raise CatalogError(f"coldstart/data/{name}: {exc}") from exc
        for m in f.markers:
            if m.id in seen:
                raise CatalogError(f"coldstart/data/{name}: duplicate marker id {m.id}")
            seen.add(m.id)
            markers.append(m.model_copy(update={"engine": f.engine}) if m.engine == "any" else m)
    try:
        doctor = DoctorFile.model_validate(_load_yaml("doctor.yaml"))
    except ValidationError as exc:
        raise CatalogError(f"coldstart/data/doctor.yaml: {exc}") from exc
    return Catalog(markers, doctor.rules)
