#!/usr/bin/env bash
# kind check of the rendered topologies against a real LWS (issue 13 item 6): create a kind cluster, install the
# LeaderWorkerSet v0.10.0 release manifests (CRDs, controller, admission and conversion webhooks) with
# server-side apply, then `kubectl apply --server-side --dry-run=server` every object the topology presets
# render in both forms (one LeaderWorkerSet per role, and one DisaggregatedSet): the API server checks each
# against the installed CRD schemas, their CEL and LWS's webhooks, and persists nothing. Tears down.
# The same objects are checked offline against the CRD files by tools/check_lws_crds.py.
#
#   e2e/kind/lws.sh               run it (exit 0 and "LWS E2E OK" on success)
#   e2e/kind/lws.sh --preflight   only check the prerequisites (exit 3 and "PREFLIGHT: why" if absent)
#
# Environment:
#   GPUSTACK_K3_LWS_MANIFESTS    the release manifests: a URL or a local file (default: the v0.10.0 release's
#                                manifests.yaml on GitHub)
#   GPUSTACK_K3_KIND_NODE_IMAGE  node image (default kindest/node:v1.30.13)
#   GPUSTACK_K3_KIND_CLUSTER     cluster name (default gpustack-k3-lws)
#   GPUSTACK_K3_KIND_KEEP=1      keep the cluster afterwards
# Needs: kind, docker (with a pullable or present node image), kubectl, curl for a URL, and the LWS controller
# image the manifests name (registry.k8s.io). None of them can be had on the project's CI machines
# (shared/research/testinfra.md §1a), where the pytest wrapper e2e/kind/test_kind_lws.py skips with the reason.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
LWS_VERSION=v0.10.0
MANIFESTS="${GPUSTACK_K3_LWS_MANIFESTS:-https://github.com/kubernetes-sigs/lws/releases/download/$LWS_VERSION/manifests.yaml}"
NODE_IMAGE="${GPUSTACK_K3_KIND_NODE_IMAGE:-kindest/node:v1.30.13}"
CLUSTER="${GPUSTACK_K3_KIND_CLUSTER:-gpustack-k3-lws}"
PY="${PYTHON:-python3}"
NS_LWS=lws-system

PREFLIGHT_ONLY=0
for a in "$@"; do
  case "$a" in
    --preflight) PREFLIGHT_ONLY=1 ;;
    *) echo "usage: $0 [--preflight]" >&2; exit 2 ;;
  esac
done

say() { printf '[kind-lws %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { say "FAIL: $*"; exit 1; }
missing() { say "PREFLIGHT: $*"; exit 3; }   # exit 3 = prerequisites absent (the pytest wrapper skips)

preflight() {
  command -v kind >/dev/null || missing "kind is not on PATH (https://kind.sigs.k8s.io; not obtainable from PyPI/apt/npm)"
  command -v docker >/dev/null || missing "docker is not on PATH"
  docker info >/dev/null 2>&1 || missing "docker daemon not reachable (DOCKER_HOST=${DOCKER_HOST:-unset})"
  command -v kubectl >/dev/null || missing "kubectl is not on PATH"
  "$PY" -c 'import gpustack_k3, yaml' 2>/dev/null || missing "$PY cannot import gpustack_k3 and yaml"
  if [[ "$MANIFESTS" == http*://* ]]; then
    command -v curl >/dev/null || missing "curl is not on PATH (needed for $MANIFESTS)"
    curl -fsSLI --max-time 30 "$MANIFESTS" >/dev/null 2>&1 \
      || missing "LWS manifests $MANIFESTS cannot be fetched (set GPUSTACK_K3_LWS_MANIFESTS to a local copy)"
  else
    [[ -s "$MANIFESTS" ]] || missing "LWS manifests file $MANIFESTS does not exist"
  fi
  docker image inspect "$NODE_IMAGE" >/dev/null 2>&1 || timeout 300 docker pull "$NODE_IMAGE" >&2 \
    || missing "node image $NODE_IMAGE is not present and cannot be pulled (no Docker Hub?)"
  return 0
}

preflight
((PREFLIGHT_ONLY)) && { say "preflight ok"; exit 0; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/gpustack-k3-lws.XXXXXX")"
export KUBECONFIG="$WORK/kubeconfig"
teardown() {
  if [[ "${GPUSTACK_K3_KIND_KEEP:-0}" == 1 ]]; then
    say "keeping cluster $CLUSTER (KUBECONFIG=$KUBECONFIG)"
  else
    kind delete cluster --name "$CLUSTER" >&2 || true
    rm -rf "$WORK"
  fi
}
trap teardown EXIT

if [[ "$MANIFESTS" == http*://* ]]; then
  curl -fsSL --max-time 120 -o "$WORK/lws-manifests.yaml" "$MANIFESTS" || die "cannot download $MANIFESTS"
else
  cp "$MANIFESTS" "$WORK/lws-manifests.yaml"
fi
say "LWS manifests: $MANIFESTS (sha256 $(sha256sum "$WORK/lws-manifests.yaml" | cut -d' ' -f1))"

say "rendering the topology presets in both forms"
PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PY" "$ROOT/tools/check_lws_crds.py" --write-rendered "$WORK/rendered" \
  || die "a topology preset was refused by the renderer"
mapfile -t FILES < <(find "$WORK/rendered" -name '*.yaml' | sort)
WANT=$(PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PY" -c 'from gpustack_k3.catalog import load_catalog
print(2 * sum(1 for p in load_catalog().presets.values() if p.document["spec"].get("roles")))')
((${#FILES[@]} == WANT)) || die "expected $WANT rendered files (each topology preset x 2 forms), found ${#FILES[@]}"

say "creating kind cluster $CLUSTER ($NODE_IMAGE)"
kind create cluster --name "$CLUSTER" --image "$NODE_IMAGE" --kubeconfig "$KUBECONFIG" --wait 180s >&2

say "installing LWS $LWS_VERSION (server-side apply)"
kubectl apply --server-side -f "$WORK/lws-manifests.yaml" >&2 || die "the LWS manifests were refused"
for crd in leaderworkersets.leaderworkerset.x-k8s.io disaggregatedsets.disaggregatedset.x-k8s.io; do
  kubectl wait --for=condition=Established "crd/$crd" --timeout=60s >&2 || die "CRD $crd not established"
done
kubectl -n "$NS_LWS" rollout status deploy/lws-controller-manager --timeout=300s >&2 \
  || die "the LWS controller (and its webhooks) did not become ready"

# The rack-scale objects of the GB300 presets (docs/design/004-rack-scale.md): the upstream ComputeDomain (NVIDIA
# DRA driver v25.12.0) and InferencePool (GAIE v1.6.0) CRDs from shared/crds, unmodified, never committed here.
UPSTREAM=""
d="$ROOT"
while [[ "$d" != "/" ]]; do
  d="$(dirname "$d")"
  if [[ -d "$d/shared/crds" ]]; then UPSTREAM="$d/shared/crds"; break; fi
done
[[ -n "$UPSTREAM" ]] || die "no shared/crds above $ROOT (the DRA driver and GAIE CRD files)"
say "installing the ComputeDomain and InferencePool CRDs from $UPSTREAM"
kubectl apply --server-side -f "$UPSTREAM/nvidia-dra-driver-gpu-v25.12.0/resource.nvidia.com_computedomains.yaml" \
  -f "$UPSTREAM/gateway-api-inference-extension-v1.6.0/inference.networking.k8s.io_inferencepools.yaml" >&2 \
  || die "the upstream CRDs were refused"
for crd in computedomains.resource.nvidia.com inferencepools.inference.networking.k8s.io; do
  kubectl wait --for=condition=Established "crd/$crd" --timeout=60s >&2 || die "CRD $crd not established"
done

# The webhooks answer once the controller has written its own serving certificate: until then an apply fails
# with "failed calling webhook"; any other refusal is the verdict on the object.
dry_run() { kubectl apply --server-side --dry-run=server -f "$1" 2>&1; }
mapfile -t NAMESPACES < <(cat "${FILES[@]}" | sed -n 's/^  namespace: //p' | sort -u)
for ns in "${NAMESPACES[@]}"; do kubectl create namespace "$ns" >&2; done
for f in "${FILES[@]}"; do
  name="${f##*/}"
  for ((i = 1; ; i++)); do
    if out="$(dry_run "$f")"; then break; fi
    if grep -qE 'failed calling webhook|no endpoints available|connection refused' <<<"$out" && ((i < 30)); then
      sleep 5
      continue
    fi
    die "$name was refused by the API server: $out"
  done
  grep -qE '^(leaderworkerset|disaggregatedset)\.' <<<"$out" || die "$name: no LWS or DS object in the dry run: $out"
  say "$name admitted (dry run): $(tr '\n' ' ' <<<"$out")"
done
echo "LWS E2E OK"
