"""Stand-ins for the core's validate/render used by the operator tests: small, but real functions of
the document (a rule on a field, objects derived from the spec), so the tests can change the spec
and see the operator react."""
from gpustack_k3.core.findings import Finding


def fake_validate(doc):
    spec = doc.get("spec") or {}
    out = []
    tp = (spec.get("parallel") or {}).get("tp")
    if tp is not None and 8 % tp:
        out.append(Finding("parallel.tp-divides-gpus", "error", "spec.parallel.tp", f"tp={tp} does not divide 8 GPUs",
                           "use tp 1, 2, 4 or 8", "test fake"))
    if spec.get("engine", {}).get("name") not in ("vllm", "sglang"):
        out.append(Finding("engine.name", "error", "spec.engine.name", "unknown engine", "use vllm or sglang", "test fake"))
    if (spec.get("scheduling") or {}).get("maxModelLen", 0) > 262144:
        out.append(Finding("context.long", "warning", "spec.scheduling.maxModelLen", "long context",
                           "expect less KV room", "fake"))
    return out


def fake_render(doc):
    name, spec = doc["metadata"]["name"], doc["spec"]
    args = [f"--tensor-parallel-size={(spec.get('parallel') or {}).get('tp', 8)}"]
    if (spec.get("scheduling") or {}).get("maxModelLen"):
        args.append(f"--max-model-len={spec['scheduling']['maxModelLen']}")
    env = [{"name": k, "value": str(v)} for k, v in sorted((spec.get("env") or {}).items())]
    container = {"name": "engine", "image": spec.get("engine", {}).get("image", "vllm/vllm-openai:v0.33.0"),
                 "args": args, "ports": [{"name": "http", "containerPort": 8000}]}
    if env:
        container["env"] = env
    return [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-config"},
         "data": {"engine": spec.get("engine", {}).get("name", "")}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
         "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                  "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [container]}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
         "spec": {"selector": {"app": name}, "ports": [{"name": "http", "port": 8000, "targetPort": 8000}]}},
    ]


FAKE_PLAN = {"engine": "vllm", "maxModelLen": 80_000, "kvTokens": 1_000_000, "maxConcurrency": 12.5,
             "kvCacheDtype": "fp8", "headroomGiB": 3.1}


def fake_plan(doc):
    return dict(FAKE_PLAN)
