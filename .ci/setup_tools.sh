#!/usr/bin/env bash
# Small command-line tools the tests marked `tools` use: shellcheck (the e2e and CI scripts; installed from
# Debian when missing) and kubectl (the emulator's client-go check; the CI image ships it, Debian bookworm
# has no package for it, so a missing kubectl fails here). Checkov has its own script (setup_checkov.sh).
# Idempotent; prints nothing on stdout.
set -euo pipefail
need=()
command -v shellcheck >/dev/null 2>&1 || need+=(shellcheck)
if [ "${#need[@]}" -gt 0 ]; then
  echo "[setup_tools] installing ${need[*]} (apt)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 && apt-get install -y -qq "${need[@]}" >&2
fi
echo "[setup_tools] shellcheck $(shellcheck --version | sed -n 's/^version: //p')" >&2
if ! command -v kubectl >/dev/null 2>&1; then
  echo "[setup_tools] ERROR: kubectl is not on PATH (the CI image ships kubectl; install a kubectl client)" >&2
  exit 1
fi
echo "[setup_tools] kubectl $(kubectl version --client -o json 2>/dev/null | sed -n 's/.*"gitVersion": *"\([^"]*\)".*/\1/p' | head -1)" >&2
