#!/usr/bin/env bash
# Build the images of the kind e2e.
#
#   e2e/images/build.sh operator TAG [docker build args...]   operator/CLI image (Dockerfile at the repo root)
#   e2e/images/build.sh vllm-cpu TAG [docker build args...]   CPU engine image (e2e/images/vllm-cpu)
#
# Extra arguments go to `docker build` as they are, e.g. --build-arg BASE_IMAGE=gpustack-k3/base:bookworm-py3
# --network host (a dockerd without a bridge, as on the project's CI machines: testinfra.md §1b).
# The engine image's context is staged in a temporary directory: its Dockerfile, the build-time
# checks, .ci/vllm_cpu/gguf2hf.py (the same converter as .ci/setup_vllm_cpu.sh) and wheels/ with
# the torch CPU wheel when this machine keeps one in ${GPUSTACK_K3_WHEELS:-/opt/wheels}.
# The operator image's context is staged too (pyproject.toml, gpustack_k3/, Dockerfile, .dockerignore).
#
# Environment:
#   GPUSTACK_K3_BUILD_CA   a PEM CA bundle for pip inside the build (behind a TLS-intercepting proxy,
#                          as on the project's CI machines); default: PIP_CERT, the bundle pip uses on
#                          this host, when set. Used by the build stages only, not part of the final images.
#   GPUSTACK_K3_WHEELS     directory with torch-2.13.0+cpu-*.whl (default /opt/wheels)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
TORCH_VERSION=2.13.0   # = .ci/setup_vllm_cpu.sh and the Dockerfile's ARG (tests/e2e_static checks)

say() { printf '[build-images %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
usage() { echo "usage: $0 operator|vllm-cpu TAG [docker build args...]" >&2; exit 2; }

[[ $# -ge 2 ]] || usage
what="$1" tag="$2"; shift 2
command -v docker >/dev/null || { say "docker is not on PATH"; exit 3; }

ctx="$(mktemp -d "${TMPDIR:-/tmp}/gpustack-k3-build-ctx.XXXXXX")"
trap 'rm -rf "$ctx"' EXIT
ca="${GPUSTACK_K3_BUILD_CA:-${PIP_CERT:-}}"
if [[ -n "$ca" && ! -f "$ca" ]]; then say "GPUSTACK_K3_BUILD_CA=$ca is not a file"; exit 2; fi

case "$what" in
  operator)
    cp "$ROOT/Dockerfile" "$ROOT/.dockerignore" "$ROOT/pyproject.toml" "$ctx/"
    tar -C "$ROOT" --exclude=__pycache__ --exclude='*.pyc' -c gpustack_k3 | tar -C "$ctx" -x
    [[ -z "$ca" ]] || cp "$ca" "$ctx/build-ca.pem"
    say "docker build -t $tag $* (context $ctx)"
    docker build -t "$tag" --label "org.opencontainers.image.created=$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$@" "$ctx" >&2
    ;;
  vllm-cpu)
    cp "$HERE/vllm-cpu/Dockerfile" "$HERE/vllm-cpu/check_versions.py" "$ctx/"
    mkdir "$ctx/ca"
    if [[ -n "$ca" ]]; then cp "$ca" "$ctx/ca/build-ca.pem"; else touch "$ctx/ca/.keep"; fi
    cp "$ROOT/.ci/vllm_cpu/gguf2hf.py" "$ctx/"
    mkdir "$ctx/wheels"
    wheels="${GPUSTACK_K3_WHEELS:-/opt/wheels}"
    shopt -s nullglob
    found=("$wheels"/torch-"$TORCH_VERSION"+cpu-*.whl)
    shopt -u nullglob
    index_args=()
    if ((${#found[@]})); then
      cp "${found[@]}" "$ctx/wheels/"
      index_args=(--build-arg TORCH_INDEX_URL=)   # the wheel is here: no PyTorch index needed
      say "staged ${found[*]##*/} (no download of torch)"
    else
      say "no torch-$TORCH_VERSION+cpu wheel in $wheels: the build takes it from the PyTorch CPU index"
      touch "$ctx/wheels/.keep"
    fi
    say "docker build -t $tag $* (context $ctx)"
    docker build -t "$tag" "${index_args[@]}" "$@" "$ctx" >&2
    ;;
  *) usage ;;
esac
say "built $tag"
echo "IMAGE=$tag"
