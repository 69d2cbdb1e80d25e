#!/usr/bin/env bash
# Small Debian tools some tests use (shellcheck for the e2e scripts). Idempotent; prints nothing on stdout.
set -euo pipefail
need=()
command -v shellcheck >/dev/null 2>&1 || need+=(shellcheck)
if [ "${#need[@]}" -gt 0 ]; then
  echo "[setup_tools] installing ${need[*]} (apt)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 && apt-get install -y -qq "${need[@]}" >&2
fi
echo "[setup_tools] shellcheck $(shellcheck --version | sed -n 's/^version: //p')" >&2
