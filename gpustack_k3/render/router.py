"""What fronts a topology on Kubernetes: the vLLM router (vLLM P/D), the SGLang router (SGLang P/D) or an
InferencePool with its endpoint picker.

docs/design/004-rack-scale.md, "Routing". Both come from the ecosystem (never a proxy of ours), their images
pinned in ``catalog/data/routing.yaml``.

* **vLLM router** (vllm-project/router ``src/main.rs``): ``vllm-router --vllm-pd-disaggregation --prefill URL ...
  --decode URL ... --prefill-policy P --decode-policy D``. One URL per *instance*: ``cache_aware`` keeps a prefix
  tree per worker URL, so it must tell the prefill instances apart. Each instance gets its own Service
  ``<name>-<role>-<group>`` selecting the instance's API servers by the LWS group-index label (set on every pod by
  LWS's pod webhook) and our role label; static Services need no RBAC (the router's own pod discovery would).
* **InferencePool** (``inference.networking.k8s.io/v1``, Gateway API Inference Extension v1.6.0): the pool selects
  the deployment's API servers on the engine port; ``endpointPickerRef`` names the picker's Service (gRPC 9002);
  the picker is the release's lightweight ``lwepp`` (``--pool-name --pool-namespace --grpc-port
  --grpc-health-port``, ``pkg/lwepp/server/options.go:60-71@v1.6.0``) with a ServiceAccount and a Role to read
  pods and inferencepools (``conformance/resources/base.yaml@v1.6.0``). The v1.6.0 picker has no prefill/decode
  scheduling: with P/D roles the rule ``rack-routing-target`` refuses before rendering.
* **SGLang router** (sglang-router / SGLang Model Gateway, the PyPI wheel and image ``sgl-model-gateway`` pinned in
  ``catalog/data/routing.yaml``): ``python3 -m sglang_router.launch_router --pd-disaggregation --prefill URL
  BOOTSTRAP_PORT ... --decode URL ... --prefill-policy P --decode-policy D --host H --port N``
  (``sglang_router/router_args.py:342-366@0.3.2``: ``--prefill`` is ``nargs="+"``, URL then the prefill's
  bootstrap port; ``--decode`` one URL). The router hands the decode the prefill URL's host and that port
  (the decode fetches the prefill's ranks from the bootstrap server there), so each prefill instance's Service
  also exposes the bootstrap port (SGLang's ``--disaggregation-bootstrap-port``; the bootstrap server runs in
  the instance's leader, ``srt/managers/disagg_service.py:21-49@0.5.23``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.api.v1alpha1 import spec as api_spec
from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG, ENGINE_VLLM
from gpustack_k3.catalog import load_catalog
from gpustack_k3.render import kubernetes as k8s
from gpustack_k3.core.k8s_names import derived_name
from gpustack_k3.render.templates import RenderError

if TYPE_CHECKING:  # pragma: no cover
    from gpustack_k3.core.launch_topology_types import RoleLaunch, TopologyLaunch

ROUTER_PORT = 8000
EPP_GRPC_PORT, EPP_HEALTH_PORT, EPP_METRICS_PORT = 9002, 9003, 9090   # conformance/resources/base.yaml@v1.6.0
EPP_HEALTH_SERVICE = "inference-extension"


def router_image() -> str:
    return load_catalog().routing.vllm_router.image


def epp_image() -> str:
    return load_catalog().routing.endpoint_picker.image


def _security() -> dict:
    return {"allowPrivilegeEscalation": False, "privileged": False, "readOnlyRootFilesystem": True,
            "runAsNonRoot": True, "runAsUser": k8s.RUN_AS, "runAsGroup": k8s.RUN_AS,
            "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}


def _pod_security() -> dict:
    return {"runAsNonRoot": True, "runAsUser": k8s.RUN_AS, "runAsGroup": k8s.RUN_AS,
            "seccompProfile": {"type": "RuntimeDefault"}}


def instance_service_name(topo: TopologyLaunch, role: RoleLaunch, group: int) -> str:
    return derived_name(role.leader.name, f"-{group}")


def instance_services(topo: TopologyLaunch, role: RoleLaunch, ns: str, labels: dict[str, str],
                      bootstrap_port: int | None = None) -> list[dict]:
    """One ClusterIP Service per instance (LWS group) of a role, in front of that instance's API servers (and,
    for an SGLang prefill, its bootstrap server on ``bootstrap_port``)."""
    launch = role.leader
    ports = [{"name": "http", "port": launch.port, "targetPort": "http", "protocol": "TCP"}]
    if bootstrap_port is not None:
        ports.append({"name": "bootstrap", "port": bootstrap_port, "targetPort": bootstrap_port, "protocol": "TCP"})
    out = []
    for g in range(role.instances):
        selector = {api.LABEL_DEPLOYMENT: topo.name, api.LABEL_ROLE: role.role, api.LABEL_API_SERVER: "true",
                    api.LWS_LABEL_GROUP_INDEX: str(g)}
        out.append({"apiVersion": "v1", "kind": "Service",
                    "metadata": {"name": instance_service_name(topo, role, g), "namespace": ns, "labels": labels},
                    "spec": {"type": "ClusterIP", "selector": selector, "ports": [dict(p) for p in ports]}})
    return out


def router_args(topo: TopologyLaunch, ns: str, prefill_policy: str, decode_policy: str) -> list[str]:
    return _pd_router_args("--vllm-pd-disaggregation", topo, ns, prefill_policy, decode_policy)


def _pd_router_args(mode: str, topo: TopologyLaunch, ns: str, prefill_policy: str, decode_policy: str,
                    extra_of=lambda r, kind: []) -> list[str]:
    """A P/D router's command line: its mode flag, ``--prefill URL [extra]`` per prefill instance and ``--decode
    URL [extra]`` per decode instance (their Services), the two policies, and where it listens."""
    args = [mode]
    for kind in ("prefill", "decode"):
        for r in (r for r in topo.roles if r.kind == kind):
            for g in range(r.instances):
                url = f"http://{instance_service_name(topo, r, g)}.{ns}.svc:{r.leader.port}"
                args += [f"--{kind}", url, *extra_of(r, kind)]
    return [*args, "--prefill-policy", prefill_policy, "--decode-policy", decode_policy,
            "--host", "0.0.0.0", "--port", str(ROUTER_PORT)]


def vllm_router(topo: TopologyLaunch, ns: str, labels: dict[str, str], *, image: str | None = None,
                prefill_policy: str, decode_policy: str) -> list[dict]:
    """Per-instance Services, the router's Service (named like the deployment: its endpoint) and Deployment."""
    _routes_engine(topo, ENGINE_VLLM, "the vLLM router",
                   "drop spec.routing.target: SGLang P/D is fronted by the SGLang router")
    return [*_pd_instance_services(topo, ns, labels, bootstrap=False), *_router_deployment(topo, ns, labels, image or router_image(), ["vllm-router"],
                                       router_args(topo, ns, prefill_policy, decode_policy))]


def _routes_engine(topo: TopologyLaunch, engine: str, router: str, fix: str) -> None:
    """A P/D router fronts one engine's P/D: another's is refused at spec.disaggregation."""
    got = topo.roles[0].leader.engine
    if got != engine:
        raise RenderError("spec.disaggregation", f"{router} does not route {got} P/D", fix)


def _pd_instance_services(topo: TopologyLaunch, ns: str, labels: dict[str, str], *, bootstrap: bool) -> list[dict]:
    """The per-instance Services of the prefill and decode roles (with ``bootstrap``: a prefill's also carries its
    bootstrap port, SGLang's P/D)."""
    objs: list[dict] = []
    for r in topo.roles:
        if r.kind in ("prefill", "decode"):
            port = bootstrap_port(r) if bootstrap and r.kind == "prefill" else None
            objs += instance_services(topo, r, ns, {**labels, api.LABEL_ROLE: r.role,
                                                   api.LABEL_APP_COMPONENT: "instance"}, port)
    return objs


def _router_deployment(topo: TopologyLaunch, ns: str, labels: dict[str, str], image: str, command: list[str],
                       args: list[str]) -> list[dict]:
    """The router's Service (named like the deployment: its endpoint) and Deployment."""
    selector = {api.LABEL_APP_INSTANCE: topo.name, api.LABEL_APP_COMPONENT: "router"}
    probe = {"tcpSocket": {"port": "http"}, "periodSeconds": 10, "failureThreshold": 3, "timeoutSeconds": 5}
    container = {"name": "router", "image": image, "imagePullPolicy": "IfNotPresent",
                 "command": list(command), "args": args,
                 "ports": [{"name": "http", "containerPort": ROUTER_PORT, "protocol": "TCP"}],
                 "resources": {"requests": {"cpu": "2", "memory": "2Gi"}, "limits": {}},
                 "readinessProbe": probe, "livenessProbe": {**probe, "periodSeconds": 30},
                 "securityContext": _security()}
    annotations = {f"checkov.io/skip{i}": f"{c}={k8s.CHECKOV_SKIPS[c]}"
                   for i, c in enumerate(("CKV_K8S_11", "CKV_K8S_13", "CKV_K8S_43", "CKV2_K8S_6"), 1)}
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": derived_name(topo.name, "-router"), "namespace": ns, "labels": labels, "annotations": annotations},
        "spec": {"replicas": 1, "revisionHistoryLimit": 3, "selector": {"matchLabels": selector},
                 "template": {"metadata": {"labels": labels}, "spec": {
                     "automountServiceAccountToken": False, "enableServiceLinks": False,
                     "securityContext": _pod_security(), "containers": [container]}}}}
    service = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": topo.name, "namespace": ns, "labels": labels},
               "spec": {"type": "ClusterIP", "selector": selector,
                        "ports": [{"name": "http", "port": ROUTER_PORT, "targetPort": "http", "protocol": "TCP"}]}}
    return [service, deployment]


# ------------------------------------------------------------------------------------------ SGLang router

def sglang_router_pin() -> Any:
    """The pinned SGLang router (``routing.sglang_router`` of catalog/data/routing.yaml)."""
    return load_catalog().routing.sglang_router


def _flag_value(argv: list[str], flag: str) -> str | None:
    """The value of ``flag`` in an argv list (``--flag V`` or ``--flag=V``; the last one wins, as argparse)."""
    value = None
    for i, tok in enumerate(argv):
        if tok == flag and i + 1 < len(argv):
            value = argv[i + 1]
        elif tok.startswith(flag + "="):
            value = tok.split("=", 1)[1]
    return value


def bootstrap_port(role: RoleLaunch) -> int:
    """The port of the SGLang bootstrap server a prefill role's leader starts: its argv's bootstrap-port flag, or
    the release's default (both from the engine's catalog entry, ``topology`` section)."""
    launch = role.leader
    topo_cat = load_catalog().engines[launch.engine].topology
    flag, default = topo_cat.get("bootstrap_port_flag"), topo_cat.get("bootstrap_port")
    if not flag or default is None:
        raise RenderError(f"{role.field_prefix}", f"the catalog entry of {launch.engine} names no bootstrap port "
                          "(topology.bootstrap_port_flag, topology.bootstrap_port)",
                          "add them to the engine's catalog entry")
    value = _flag_value(launch.args, flag)
    try:
        port = int(value) if value is not None else int(default)
    except (TypeError, ValueError):
        port = -1
    if not 0 < port < 65536:
        raise RenderError(f"{role.field_prefix}", f"{flag} {value!r} is not a port", "give a port number 1-65535")
    return port


def sglang_router_args(topo: TopologyLaunch, ns: str, prefill_policy: str, decode_policy: str,
                       pin: Any) -> list[str]:
    """The router's arguments: one ``--prefill URL BOOTSTRAP_PORT`` per prefill instance, one ``--decode URL``
    per decode instance (router_args.py:342-366@0.3.2), the policies checked against the router's choices."""
    for field, policy, allowed in (("prefillPolicy", prefill_policy, pin.prefill_policies),
                                   ("decodePolicy", decode_policy, pin.decode_policies)):
        if policy not in allowed:
            raise RenderError(f"spec.routing.{field}", f"the SGLang router {pin.version} has no policy {policy!r}",
                              f"one of: {', '.join(allowed)}")
    def bootstrap(r, kind: str) -> list[str]:   # a prefill instance's bootstrap port follows its URL
        port = bootstrap_port(r) if kind == "prefill" else None
        return [str(port)] if port is not None else []

    return _pd_router_args("--pd-disaggregation", topo, ns, prefill_policy, decode_policy, bootstrap)


def sglang_router(topo: TopologyLaunch, ns: str, labels: dict[str, str], *, image: str | None = None,
                  prefill_policy: str, decode_policy: str) -> list[dict]:
    """Per-instance Services (a prefill's with its bootstrap port), the router's Service and Deployment."""
    _routes_engine(topo, ENGINE_SGLANG, "the SGLang router", "use the vLLM router for vLLM P/D")
    pin = sglang_router_pin()
    args = sglang_router_args(topo, ns, prefill_policy, decode_policy, pin)
    return [*_pd_instance_services(topo, ns, labels, bootstrap=True),
            *_router_deployment(topo, ns, labels, image or pin.image, pin.command, args)]


def inference_pool(topo: TopologyLaunch, ns: str, labels: dict[str, str], *, image: str | None = None) -> list[dict]:
    """The InferencePool over the deployment's API servers, the endpoint picker (ServiceAccount, Role,
    RoleBinding, Service, Deployment)."""
    if topo.disaggregation:
        raise RenderError("spec.routing.target", "the v1.6.0 endpoint picker has no prefill/decode scheduling",
                          "use routing.target vllm-router with prefill/decode roles")
    ports = sorted({r.leader.port for r in topo.roles})
    epp = derived_name(topo.name, "-epp")
    epp_labels = {**labels, api.LABEL_APP_COMPONENT: "endpoint-picker"}
    selector = {api.LABEL_APP_INSTANCE: topo.name, api.LABEL_APP_COMPONENT: "endpoint-picker"}
    pool = {"apiVersion": api.INFERENCE_POOL_API_VERSION, "kind": api.INFERENCE_POOL_KIND,
            "metadata": {"name": topo.name, "namespace": ns, "labels": labels},
            "spec": {"selector": {"matchLabels": {api.LABEL_DEPLOYMENT: topo.name, api.LABEL_API_SERVER: "true"}},
                     "targetPorts": [{"number": p} for p in ports],
                     "endpointPickerRef": {"name": epp, "port": {"number": EPP_GRPC_PORT}, "failureMode": "FailClose"}}}
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": epp, "namespace": ns, "labels": epp_labels}}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": epp, "namespace": ns, "labels": epp_labels},
            "rules": [{"apiGroups": [api.INFERENCE_POOL_GROUP], "resources": [api.INFERENCE_POOL_PLURAL],
                       "verbs": ["get", "list", "watch"]},
                      {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": epp, "namespace": ns, "labels": epp_labels},
               "subjects": [{"kind": "ServiceAccount", "name": epp, "namespace": ns}],
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": epp}}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": epp, "namespace": ns, "labels": epp_labels},
               "spec": {"type": "ClusterIP", "selector": selector,
                        "ports": [{"name": "grpc", "port": EPP_GRPC_PORT, "targetPort": "grpc", "protocol": "TCP",
                                   "appProtocol": "http2"}]}}
    grpc_probe = {"grpc": {"port": EPP_HEALTH_PORT, "service": EPP_HEALTH_SERVICE}, "periodSeconds": 10}
    container = {"name": "epp", "image": image or epp_image(), "imagePullPolicy": "IfNotPresent",
                 "args": ["--pool-name", topo.name, "--pool-namespace", ns, "--zap-encoder", "json",
                          "--grpc-port", str(EPP_GRPC_PORT), "--grpc-health-port", str(EPP_HEALTH_PORT)],
                 "ports": [{"name": "grpc", "containerPort": EPP_GRPC_PORT, "protocol": "TCP"},
                           {"name": "grpc-health", "containerPort": EPP_HEALTH_PORT, "protocol": "TCP"},
                           {"name": "metrics", "containerPort": EPP_METRICS_PORT, "protocol": "TCP"}],
                 "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {}},
                 "readinessProbe": grpc_probe, "livenessProbe": grpc_probe, "securityContext": _security()}
    skips = {"CKV_K8S_11": k8s.CHECKOV_SKIPS["CKV_K8S_11"], "CKV_K8S_13": k8s.CHECKOV_SKIPS["CKV_K8S_13"],
             "CKV_K8S_38": "The endpoint picker watches the InferencePool and its pods through the API server "
                           "(the Role beside it): it needs its service-account token.",
             "CKV_K8S_43": "The endpoint picker is pinned by its release tag (catalog/data/routing.yaml); pin a "
                           "digest there to satisfy this.",
             "CKV2_K8S_6": k8s.CHECKOV_SKIPS["CKV2_K8S_6"]}
    annotations = {f"checkov.io/skip{i}": f"{c}={why}" for i, (c, why) in enumerate(skips.items(), 1)}
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": epp, "namespace": ns, "labels": epp_labels, "annotations": annotations},
        "spec": {"replicas": 1, "revisionHistoryLimit": 3, "selector": {"matchLabels": selector},
                 "template": {"metadata": {"labels": epp_labels}, "spec": {
                     "serviceAccountName": epp, "automountServiceAccountToken": True, "enableServiceLinks": False,
                     "terminationGracePeriodSeconds": 130, "securityContext": _pod_security(),
                     "containers": [container]}}}}
    return [sa, role, binding, service, deployment, pool]


def front(topo: TopologyLaunch, doc: Any, ns: str, labels: dict[str, str], *, router_image: str | None = None
          ) -> list[dict] | None:
    """The objects in front of a topology per ``spec.routing`` (None: the plain Service of every API server)."""
    routing = getattr(doc.spec, "routing", None) if doc is not None else None
    target = routing.target if routing is not None else None
    if routing is not None and not topo.disaggregation:
        for f in ("prefillPolicy", "decodePolicy"):
            if f in routing.model_fields_set:
                raise RenderError(f"spec.routing.{f}", "the routing policies are the prefill/decode router's: a "
                                  "deployment without prefill and decode roles has no router to give them to",
                                  f"drop spec.routing.{f}")
    if target == "inferencePool":
        return inference_pool(topo, ns, labels)
    if target == "vllm-router" or topo.disaggregation:
        if not topo.disaggregation:
            raise RenderError("spec.routing.target", "the vLLM router is rendered for prefill/decode roles only",
                              "drop routing.target, or use inferencePool")
        kw: dict[str, Any] = {"image": router_image}
        decodes = sum(r.instances for r in topo.roles if r.kind == "decode")
        routing = routing or api_spec.Routing()
        kw.update(prefill_policy=routing.prefillPolicy, decode_policy=routing.decode_policy_for(decodes))
        if topo.roles[0].leader.engine == ENGINE_SGLANG:
            if target == "vllm-router":
                raise RenderError("spec.routing.target", "the vLLM router does not route SGLang P/D",
                                  "drop spec.routing.target: SGLang P/D is fronted by the SGLang router")
            return sglang_router(topo, ns, labels, **kw)
        return vllm_router(topo, ns, labels, **kw)
    return None
