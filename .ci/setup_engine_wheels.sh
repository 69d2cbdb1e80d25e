#!/usr/bin/env bash
# The released engine wheels whose argument parsers the catalog pins (tools/engine_parsers/dump.py), and the
# small venv the parsers are built in. Idempotent.
#
#   .ci/setup_engine_wheels.sh     download what is missing; print the wheel directory on the last stdout line
#
# Wheels land in ${GPUSTACK_K3_CACHE:-$HOME/.cache/gpustack-k3}/wheels (`pip download --no-deps`, nothing is
# installed); the list is every catalog version's `parser.wheel` (dump.py --wheels). The venv (pinned pure-Python
# libraries of tools/engine_parsers/requirements.txt) is made under .../engine-parsers/. tests/engine/
# test_engine_parser_dumps.py re-dumps each parser from its wheel and compares with the committed dump.
# Progress goes to stderr.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${GPUSTACK_K3_CACHE:-$HOME/.cache/gpustack-k3}"
DEST="$CACHE/wheels"
PY="${PYTHON:-python3}"

say() { printf '[setup_engine_wheels %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

"$PY" -m pip --version >/dev/null 2>&1 || die "$PY has no pip; set PYTHON to an interpreter with pip"
mkdir -p "$DEST"
mapfile -t WANT < <("$PY" "$HERE/tools/engine_parsers/dump.py" --wheels)
[[ ${#WANT[@]} -gt 0 ]] || die "dump.py --wheels listed no wheel"
# the pinned SGLang router (catalog/data/routing.yaml sglang_router): its own parser reads our rendered router
# arguments (tests/render/test_sglang_router_wheel.py)
WANT+=("sglang-router==$(PYTHONPATH="$HERE" "$PY" -c 'from gpustack_k3.render.router import sglang_router_pin; print(sglang_router_pin().version)')")
# releases newer than the newest pinned one, fetched so tools/release_diff.py can diff their validation code
# against the pinned release before they are pinned (docs/releases/); drop one here once the catalog pins it
# (dump.py --wheels then lists it)
DIFFED=()
for spec in "${DIFFED[@]}"; do
  [[ " ${WANT[*]} " == *" $spec "* ]] || WANT+=("$spec")
done
# fetch NAME==VERSION [WHY]: the wheel into $DEST unless it is there
fetch() {
  local spec="$1" name version
  name="${spec%%==*}"; name="${name//-/_}"; version="${spec##*==}"
  if compgen -G "$DEST/$name-$version-*.whl" >/dev/null; then
    say "$spec already in $DEST"
    return
  fi
  say "downloading $spec${2:+ ($2)}"
  "$PY" -m pip download --quiet --disable-pip-version-check --no-deps "$spec" -d "$DEST" >&2 \
    || die "pip download $spec failed"
  compgen -G "$DEST/$name-$version-*.whl" >/dev/null || die "$spec: no wheel after download"
}
for spec in "${WANT[@]}"; do fetch "$spec"; done
# The FlashInfer wheel each SGLang wheel pins (its METADATA Requires-Dist flashinfer_python==X): the engine oracle
# reads the signature SGLang's Kimi-K3 DCP probe inspects from its source (gpustack_k3/oracle/engine_side/doubles.py
# PROBED_SIGNATURES; nothing of it is installed or imported). ~65 MB each.
mapfile -t PINS < <("$PY" - "$DEST" "${WANT[@]}" <<'PY'
import re, sys, zipfile
from pathlib import Path
dest, pins = Path(sys.argv[1]), set()
for spec in sys.argv[2:]:
    name, _, version = spec.partition("==")
    if name != "sglang":
        continue
    for whl in dest.glob(f"sglang-{version}-*.whl"):
        with zipfile.ZipFile(whl) as z:
            meta = z.read(f"sglang-{version}.dist-info/METADATA").decode()
        pins |= set(re.findall(r"^Requires-Dist: flashinfer[_-]python(?:\[[^\]]*\])?==([^\s;,]+)", meta, re.M))
print("\n".join(f"flashinfer-python=={v}" for v in sorted(pins)))
PY
)
for spec in "${PINS[@]}"; do
  [[ -n "$spec" ]] && fetch "$spec" "the FlashInfer an SGLang wheel pins: its source answers the oracle's signature probe"
done
say "tools venv: $("$PY" "$HERE/tools/engine_parsers/dump.py" --prepare 2>/dev/null | tail -1)"
echo "$DEST"
