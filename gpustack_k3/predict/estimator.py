"""The estimator interface the predictor talks to: op graphs as plain op specs, and a pricer.

An op spec is a one-key dict ``{Kind: {fields}}`` (the wire form of the estimator's op list). A ``PlannedOp`` is
one op spec with the shape it is priced at (phase, batch, s, prefix) and the table that prices it; corrections
(``corrections.py``) rewrite planned ops, the estimator prices them. Nothing else of the estimator is visible.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Protocol

import yaml

from gpustack_k3.predict.types import EngineConfig, OpCost

ATTENTION_KINDS = {"GenerationAttention", "GenerationMla", "MlaBmm", "ContextAttention", "ContextMla",
                   "MlaModuleGeneration", "MlaModuleContext"}
COMM_KINDS = {"CustomAllReduce", "Nccl", "P2P", "MoeDispatch", "AllReduce"}


@cache
def settings() -> dict:
    """data/aic.yaml: how a launch maps onto the estimator's tables and op graph (read by the adapter and by our
    corrections; no performance figure)."""
    return yaml.safe_load(resources.files("gpustack_k3.predict").joinpath("data/aic.yaml").read_text())


def kind(spec: dict) -> str:
    return next(iter(spec))


def fields(spec: dict) -> dict:
    return spec[kind(spec)]


def op_name(spec: dict) -> str:
    return str(fields(spec).get("name", kind(spec)))


def category(spec: dict) -> str:
    """The breakdown bucket of an op (types.CATEGORIES)."""
    k, name = kind(spec), op_name(spec)
    if name.startswith("draft_"):
        return "draft"
    if k == "Moe":
        return "moe_weights"
    if k == "Overlap":       # ops run concurrently (DeepSeek: routed MoE beside the shared expert): the MoE's bucket
        parts = [kind(x) for g in ("group_a", "group_b") for x in fields(spec).get(g, [])]
        return "moe_weights" if "Moe" in parts else "other"
    if k in COMM_KINDS:
        return "communication"
    if k == "Fallback":
        prim = fields(spec).get("primary") or {}
        return "attention_kv" if prim and kind(prim) in ATTENTION_KINDS else "other"
    if k in ATTENTION_KINDS:
        return "attention_kv"
    if k == "KdaKernel" or k.startswith("Kda"):
        return "linear_attention"
    if k == "Gemm":
        return "dense_weights"
    return "other"


@dataclass
class PlannedOp:
    spec: dict
    phase: str                 # "generation" | "context"
    batch: int                 # rows the op is evaluated at (requests for attention, tokens otherwise)
    s: int                     # KV / sequence length seen by the op
    table: str                 # estimator backend whose table prices it ("vllm", "sglang")
    prefix: int = 0
    corrections: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return op_name(self.spec)

    @property
    def category(self) -> str:
        return category(self.spec)

    def clone(self, **changes) -> PlannedOp:
        new = PlannedOp(copy.deepcopy(self.spec), self.phase, self.batch, self.s, self.table, self.prefix,
                        list(self.corrections))
        for k, v in changes.items():
            setattr(new, k, v)
        return new


class Estimator(Protocol):
    name: str

    def graph(self, cfg: EngineConfig, phase: str) -> list[dict]:
        """The estimator's own op graph of one forward step of the role's model (op specs)."""

    def price(self, cfg: EngineConfig, ops: list[PlannedOp]) -> list[OpCost]:
        """Each planned op priced (ms per step), with the estimator's source of the figure."""

    def catalog_arch(self, model: str):
        """A catalog model's figures (core.model_config.ModelArch) from the config the estimator has of it."""

    def family(self, cfg: EngineConfig, arch) -> str:
        """The estimator's model family of the model; NoData ("not modelled", naming it) when it has none."""
