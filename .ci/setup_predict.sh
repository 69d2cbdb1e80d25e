#!/usr/bin/env bash
# aiconfigurator-core 0.12.0, the [predict] extra, for the `predict` test tier (gpustack-k3 predict / advise). Idempotent.
#
#   .ci/setup_predict.sh    install it into python3 from a wheel cache and print "aiconfigurator-core 0.12.0" last
#
# The wheel and its dependencies (~616 MB: numpy, pandas, pyarrow, scipy) are downloaded once into
# ${GPUSTACK_K3_CACHE:-$HOME/.cache/gpustack-k3}/wheels-predict; later runs install offline from there. The install
# must only add packages: a dry run that would change the version of an installed package stops the script
# (our pinned dependencies are never moved). Progress goes to stderr.
set -euo pipefail

VERSION="0.12.0"
PKG="aiconfigurator-core==$VERSION"
CACHE="${GPUSTACK_K3_CACHE:-$HOME/.cache/gpustack-k3}"
WHEELS="$CACHE/wheels-predict"
PY="${PYTHON:-python3}"

say() { printf '[setup_predict %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

installed() {
  "$PY" -c 'import importlib.metadata as m, sys; sys.exit(0 if m.version("aiconfigurator-core") == sys.argv[1] else 1)' \
    "$VERSION" 2>/dev/null
}

if installed; then
  say "$PKG already installed"
  echo "aiconfigurator-core $VERSION"
  exit 0
fi

"$PY" -m pip --version >/dev/null 2>&1 || die "$PY has no pip; set PYTHON to an interpreter with pip"
mkdir -p "$WHEELS"
if ! compgen -G "$WHEELS/aiconfigurator_core-$VERSION-*.whl" >/dev/null; then
  say "downloading $PKG and its dependencies into $WHEELS (once)"
  "$PY" -m pip download -q --disable-pip-version-check -d "$WHEELS" "$PKG" >&2 || die "pip download $PKG failed (is PyPI reachable?)"
fi

plan="$("$PY" -m pip install --dry-run --no-index --find-links "$WHEELS" --disable-pip-version-check "$PKG" 2>&1 \
        | sed -n 's/^Would install //p')"
# shellcheck disable=SC2086 # one word per package
"$PY" - $plan <<'PYEOF' || die "installing $PKG would change an installed package (see above); use a separate venv"
import importlib.metadata as m
import sys

moved = []
for item in sys.argv[1:]:
    name, _, version = item.rpartition("-")
    try:
        have = m.version(name)
    except m.PackageNotFoundError:
        continue
    if have != version:
        moved.append(f"{name} {have} -> {version}")
if moved:
    print("would move: " + ", ".join(moved), file=sys.stderr)
    sys.exit(1)
PYEOF

t0=$SECONDS
"$PY" -m pip install -q --no-index --find-links "$WHEELS" --disable-pip-version-check "$PKG" >&2 \
  || die "pip install $PKG from $WHEELS failed"
installed || die "$PKG is not importable after the install"
say "installed $PKG in $((SECONDS - t0)) s"
echo "aiconfigurator-core $VERSION"
