#!/usr/bin/env bash
# checkov in a venv of its own (its pinned dependencies must not touch the project's python). Idempotent.
#
#   .ci/setup_checkov.sh      create/refresh the venv if needed; print the checkov path on the last stdout line
#
# Venv: ${GPUSTACK_K3_CACHE:-$HOME/.cache/gpustack-k3}/tools/checkov-venv. Callers export
# GPUSTACK_K3_CHECKOV="$(.ci/setup_checkov.sh | tail -1)"; tests/helm runs it over the chart output
# offline (--skip-download). Progress goes to stderr.
set -euo pipefail

VERSION="${GPUSTACK_K3_CHECKOV_VERSION:-3.3.30}"
CACHE="${GPUSTACK_K3_CACHE:-$HOME/.cache/gpustack-k3}"
VENV="$CACHE/tools/checkov-venv"
BIN="$VENV/bin/checkov"
PY="${PYTHON:-python3}"

say() { printf '[setup_checkov %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

if [[ -x "$BIN" ]] && [[ "$("$BIN" --version 2>/dev/null || true)" == "$VERSION" ]]; then
  say "checkov $VERSION already at $BIN"
  echo "$BIN"
  exit 0
fi
t0=$SECONDS
mkdir -p "$CACHE/tools"
[[ -x "$VENV/bin/python" ]] || "$PY" -m venv "$VENV" || die "cannot create a venv with $PY"
say "installing checkov==$VERSION into $VENV (PyPI)"
"$VENV/bin/pip" install -q --disable-pip-version-check "checkov==$VERSION" >&2 || die "pip install checkov==$VERSION failed"
[[ "$("$BIN" --version 2>/dev/null || true)" == "$VERSION" ]] || die "$BIN does not report $VERSION"
say "checkov $VERSION ready in $((SECONDS - t0)) s"
echo "$BIN"
