"""The topology family: per rule a firing and a quiet case, from the topology presets (P/D on GB300 and B300).

A case is a document edit (a function over the preset's data), and for the facts only a command line can state
(two LB modes at once, a literal start rank, a side-channel host left at localhost) an edit of the topology the
document resolves to. check-pd's own corpus (tests/cli) reaches the same rules from command lines."""
from __future__ import annotations

import copy
from collections.abc import Callable

import pytest

from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
from gpustack_k3.catalog import load_catalog
from gpustack_k3.core.launch import Refused, build_topology_launch
from gpustack_k3.core.rules import RULES, validate, validate_topology
from gpustack_k3.core.topology import Topology, document_topology
from tests.core.test_topology_sglang import SGLANG_CASES
from tests.render.test_rack import RACK_CASES

DSV = "dsv41-flash-gb300-8p1d"
KIMI = "kimi-k3-b300-1p1d"


def data(preset: str) -> dict:
    return copy.deepcopy(load_catalog().presets[preset].document)


def role(d: dict, name: str) -> dict:
    return next(r for r in d["spec"]["roles"] if r["name"] == name)


def edit(preset: str, fn: Callable[[dict], None] | None = None) -> DeploymentDocument:
    d = data(preset)
    if fn:
        fn(d)
    return DeploymentDocument.model_validate(d)


def tweak(preset: str, name: str, **facts) -> Callable[[], Topology]:
    """The preset's topology with one role's launch facts replaced (what a command line can state)."""
    def build() -> Topology:
        t = document_topology(edit(preset))
        return Topology([r._replace(**facts) if r.name == name else r for r in t.roles], t.disaggregation, t.source)
    return build


def doc_case(preset: str, fn: Callable[[dict], None] | None = None) -> Callable[[], DeploymentDocument]:
    return lambda: edit(preset, fn)


def _set(path: str, value, name: str | None = None):
    def fn(d: dict) -> None:
        cur = role(d, name) if name else d["spec"]
        *head, last = path.split(".")
        for p in head:
            cur = cur.setdefault(p, {})
        cur[last] = value
    return fn


def _drop_decode(d: dict) -> None:
    d["spec"]["roles"] = [r for r in d["spec"]["roles"] if r["role"] != "decode"]


def _one_rank(d: dict) -> None:
    r = role(d, "decode")
    r.update(podsPerInstance=1, gpusPerPod=1, loadBalancing="internal")
    r["parallel"].update(dp=1, dpLocal=1)


def _single_rank_hybrid(d: dict) -> None:
    r = role(d, "decode")
    r.update(podsPerInstance=32, gpusPerPod=1)
    r["parallel"]["dpLocal"] = 1


def _tp6_prefill(d: dict) -> None:
    """prefill TP 6 / DCP 6, decode TP 8 / DCP 8: DCP 6 and 8 do not divide one another."""
    role(d, "prefill")["parallel"] = {"tp": 6, "dcp": 6}
    role(d, "prefill")["gpusPerPod"] = 6


# rule id -> (firing case, quiet case); a case returns a document or a Topology
TOPOLOGY_CASES: dict[str, tuple[Callable, Callable]] = {
    "topology-version-unverified": (doc_case(KIMI, _set("engine.version", "kimi-k3")), doc_case(KIMI)),
    "topology-dp-layout": (doc_case(DSV, _set("parallel.dp", 30, "decode")), doc_case(DSV)),
    "topology-gpus-per-pod": (doc_case(DSV, _set("gpusPerPod", 8, "decode")), doc_case(DSV)),
    "topology-start-rank": (tweak(DSV, "decode", start_rank=6), tweak(DSV, "decode", start_rank=8)),
    "topology-ep-size": (doc_case(DSV), doc_case(KIMI)),
    "topology-lb-exclusive": (tweak(DSV, "decode", external_lb=True), doc_case(DSV)),
    "topology-external-lb-rank": (doc_case(DSV, _set("loadBalancing", "external", "decode")), doc_case(DSV)),
    "topology-external-lb-needs-rank": (tweak(DSV, "decode", external_lb=True, rank_given=False),
                                        tweak(DSV, "decode", external_lb=True, rank_given=True)),
    "topology-nnodes-divide": (tweak(DSV, "decode", nnodes=3), tweak(DSV, "decode", nnodes=8)),
    "topology-hybrid-single-rank": (doc_case(DSV, _single_rank_hybrid), doc_case(DSV)),
    "topology-nnodes-backend": (doc_case(DSV, _set("parallel.dpBackend", "ray", "decode")),
                                doc_case(DSV, _set("parallel.dpBackend", "mp", "decode"))),
    "eplb-needs-ep": (doc_case(DSV, _set("parallel.expertParallel", False, "decode")), doc_case(DSV)),
    "eplb-needs-ranks": (doc_case(DSV, _one_rank), doc_case(DSV)),
    "eplb-redundant-needs-eplb": (doc_case(DSV, _set("parallel.eplb", {"enabled": False, "numRedundantExperts": 32},
                                                     "decode")),
                                  doc_case(DSV, _set("parallel.eplb", {"numRedundantExperts": 32}, "decode"))),
    "eplb-async-communicator": (doc_case(DSV, _set("parallel.eplb.communicator", "torch_nccl", "decode")),
                                doc_case(DSV, _set("parallel.eplb.communicator", "nixl", "decode"))),
    "eplb-draft-always": (doc_case(DSV, _set("parallel.eplb.includeDraft", False, "decode")), doc_case(DSV)),
    "topology-max-num-seqs-per-rank": (doc_case(DSV), doc_case(KIMI)),
    "pd-roles": (doc_case(DSV, _drop_decode), doc_case(DSV)),
    "pd-compat-hash": (doc_case(KIMI, _set("memory.kvCacheDtype", "auto", "prefill")), doc_case(KIMI)),
    "pd-compat-hash-undecided": (doc_case(KIMI, _set("vllm.attentionBackend", None, "decode")),
                                 doc_case(KIMI)),
    "pd-dcp-divide": (doc_case(KIMI, _tp6_prefill), doc_case(KIMI)),
    "pd-kv-role": (tweak(KIMI, "prefill", kv_transfer={"kv_connector": "NixlConnector", "kv_role": "kv_consumer"}),
                   tweak(KIMI, "prefill", kv_transfer={"kv_connector": "NixlConnector", "kv_role": "kv_both"})),
    "kv-connector-unknown": (tweak(KIMI, "decode", kv_transfer={"kv_connector": "NoSuchConnector", "kv_role": "kv_both"}),
                             tweak(KIMI, "decode", kv_transfer={"kv_connector": "NixlPullConnector",
                                                                "kv_role": "kv_consumer"})),
    "pd-push-no-dcp": (doc_case(KIMI, _set("disaggregation.connector", "NixlPushConnector")), doc_case(KIMI)),
    "pd-handshake-check-off": (doc_case(KIMI, _set("disaggregation.enforceHandshakeCompat", False)), doc_case(KIMI)),
    "pd-hybrid-dcp-equal": (doc_case(KIMI, _set("parallel.dcp", 1, "prefill")), doc_case(KIMI)),
    "pd-hybrid-block-size": (doc_case(KIMI, _set("extraArgs", ["--block-size", "64"], "decode")), doc_case(KIMI)),
    "pd-dcp-nixl": (doc_case(KIMI, _set("parallel.dcp", 2)), doc_case(KIMI)),
    "pd-side-channel-host": (tweak(KIMI, "decode", side_channel_host_from_pod=False), doc_case(KIMI)),
    "pd-side-channel-ports": (doc_case(DSV, _set("disaggregation.sideChannelPort", 7990)), doc_case(DSV)),
    # one decode instance: power_of_two given is refused (the routers exit at start); left out, round_robin is rendered
    "router-power-of-two-one-instance": (doc_case(KIMI, _set("routing", {"decodePolicy": "power_of_two"})),
                                         doc_case(KIMI)),
    # a one-pod, one-rank prefill has nothing to balance; the 8-pod DP-32 decode's hybrid LB is rendered
    "topology-lb-no-effect": (doc_case(KIMI, _set("loadBalancing", "hybrid", "prefill")), doc_case(DSV)),
    "hardware-gpucount-with-roles": (doc_case(KIMI, _set("hardware.gpuCount", 4)),
                                     doc_case(KIMI, _set("hardware.gpuCount", 8))),
}
TOPOLOGY_CASES.update(RACK_CASES)   # the rack rules (core/rules/rack.py): their cases live beside their render tests
TOPOLOGY_CASES.update(SGLANG_CASES)  # the SGLang rules (core/rules/topology_sglang.py): tests/core/test_topology_sglang.py


def findings_of(case) -> list:
    x = case()
    return validate_topology(x) if isinstance(x, Topology) else validate(x)


def test_every_topology_rule_has_a_case():
    from tests.core.test_verdicts_fresh import FRESH_DIRECT   # command-line cases (tests/core/test_verdicts_fresh.py)

    topology = {r.id for r in RULES.values() if r.family == "topology"}
    assert set(TOPOLOGY_CASES) | (FRESH_DIRECT & topology) == topology


@pytest.mark.parametrize("rule_id", sorted(TOPOLOGY_CASES))
def test_fires(rule_id):
    fire, _ = TOPOLOGY_CASES[rule_id]
    hits = [f for f in findings_of(fire) if f.rule == rule_id]
    assert hits, rule_id
    r = RULES[rule_id]
    for f in hits:
        assert f.severity == r.severity and f.fix and f.source
        assert f.field.startswith(("spec.roles", "spec.disaggregation", "spec.engine", "spec.parallel",
                                   "spec.placement", "spec.routing", "spec.hardware")), f.field


@pytest.mark.parametrize("rule_id", sorted(TOPOLOGY_CASES))
def test_quiet(rule_id):
    _, quiet = TOPOLOGY_CASES[rule_id]
    assert [f for f in findings_of(quiet) if f.rule == rule_id] == []


@pytest.mark.parametrize("preset", [DSV, "dsv41-flash-gb300-7p1d", KIMI])
def test_the_topology_presets_have_no_errors(preset):
    assert [f for f in validate(edit(preset)) if f.severity == "error"] == []


def test_findings_point_at_the_role():
    fs = [f for f in validate(edit(DSV, _set("parallel.dp", 30, "decode"))) if f.rule == "topology-dp-layout"]
    assert [f.field for f in fs] == ["spec.roles[1].parallel.dp"]
    assert "DP 30 != 8 pod(s) x dpLocal 4 = 32" in fs[0].message


def test_a_refused_topology_renders_nothing():
    with pytest.raises(Refused) as exc:
        build_topology_launch(edit(DSV, _set("parallel.dp", 30, "decode")))
    assert any(f.rule == "topology-dp-layout" for f in exc.value.findings)


def test_the_seed_decode_figures():
    """Seed 002: 64 requests per GPU at DEP32 -> 2,048 per DEP32 instance; EP 32 holds 384 / 32 = 12 experts."""
    fs = {f.rule: f.message for f in validate(edit(DSV)) if f.field.startswith("spec.roles[1]")}
    assert "64 per DP rank x DP 32 = 2,048 per instance" in fs["topology-max-num-seqs-per-rank"]
    assert "EP = TP 1 x DP 32 = 32; 384 routed experts -> 12 per rank" in fs["topology-ep-size"]


@pytest.mark.parametrize("decodes, rendered", [(1, "round_robin"), (2, "power_of_two")])
def test_the_decode_policy_left_out_is_one_the_router_accepts(decodes, rendered):
    """vllm-router / sglang-router refuse power_of_two with one worker of a kind ("Power-of-two policy for decode
    requires at least 2 decode workers"): left out, the rendered policy follows the decode instance count."""
    from gpustack_k3.render.lws import render_document

    doc = edit(KIMI, lambda d: role(d, "decode").__setitem__("instances", decodes))
    assert [f for f in validate(doc) if f.rule == "router-power-of-two-one-instance"] == []
    objs = render_document(doc, namespace="llm")
    (router,) = [o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("router")]
    args = router["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--decode-policy") + 1] == rendered
