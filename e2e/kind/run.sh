#!/usr/bin/env bash
# kind end-to-end for the chart and the CRD (issue 4): create a kind cluster, install the chart with
# the real helm, apply every preset as a K3Deployment, check that the API server's CEL refuses the
# invalid example (no operator needed for that), tear down.
#
#   e2e/kind/run.sh                 run it (exit 0 and "E2E OK" on success)
#   e2e/kind/run.sh --preflight     only check that kind, docker, kubectl, helm and the node image are there
#
# Environment:
#   GPUSTACK_K3_KIND_NODE_IMAGE  node image (default kindest/node:v1.30.13)
#   GPUSTACK_K3_KIND_CLUSTER     cluster name (default gpustack-k3-e2e)
#   GPUSTACK_K3_KIND_KEEP=1      keep the cluster afterwards
#   GPUSTACK_K3_E2E_IMAGE        operator image to load into kind and wait for (optional: without it the
#                                operator Deployment is installed but its rollout is not awaited)
#   GPUSTACK_K3_HELM             helm binary (default: .ci/setup_helm.sh cache, then PATH)
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
  if ! docker image inspect "$NODE_IMAGE" >/dev/null 2>&1; then
    timeout 120 docker pull "$NODE_IMAGE" >&2 || missing "node image $NODE_IMAGE is not present and cannot be pulled"
  fi
}

preflight
[[ "${1:-}" == "--preflight" ]] && { say "preflight ok"; exit 0; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/gpustack-k3-kind.XXXXXX")"
export KUBECONFIG="$WORK/kubeconfig"
export HELM_CACHE_HOME="$WORK/helm/cache" HELM_CONFIG_HOME="$WORK/helm/config" HELM_DATA_HOME="$WORK/helm/data"
teardown() {
  if [[ "${GPUSTACK_K3_KIND_KEEP:-0}" == 1 ]]; then
    say "keeping cluster $CLUSTER (KUBECONFIG=$KUBECONFIG)"
  else
    kind delete cluster --name "$CLUSTER" >&2 || true
    rm -rf "$WORK"
  fi
}
trap teardown EXIT

say "creating kind cluster $CLUSTER ($NODE_IMAGE)"
kind create cluster --name "$CLUSTER" --image "$NODE_IMAGE" --kubeconfig "$KUBECONFIG" --wait 180s >&2

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
"$PY" - "$WORK/presets" <<'PYEOF'
import sys
from gpustack_k3.charts import example_resources   # the same files manifests/examples carries
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
echo "E2E OK"
