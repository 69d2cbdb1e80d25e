#!/usr/bin/env bash
# Real GPUStack 2.3.0 server for the `gpustack` test tier (shared/research/gpustack.md §5).
#
#   .ci/setup_gpustack.sh install   cached venv with gpustack==2.3.0 (never a dependency of our package)
#   .ci/setup_gpustack.sh start     install (if needed) + PostgreSQL 15 + `gpustack start`, both inside a
#                                   network namespace that holds only `lo`; prints KEY=VALUE lines
#   .ci/setup_gpustack.sh stop      kills what `start` recorded, by PID, and deletes the namespace
#                                   (safe to call after any failure, and twice)
#   .ci/setup_gpustack.sh env       prints the KEY=VALUE lines of a running server
#
# Why a namespace: `gpustack start` has no bind-host flag and listens on 0.0.0.0 (server/server.py:335,
# gpustack.md §5.2). Inside `ip netns add $NS` only loopback exists, so nothing is reachable from outside;
# tests reach the server through a host-loopback forwarder, .ci/gpustack/forward.py, whose listening socket is created in the host namespace
# on 127.0.0.1 and whose outbound connections are made inside the namespace; the fake worker of the
# scheduling test runs inside the namespace with `ip netns exec`).
#
# Layout: the venv is cached in ${GPUSTACK_K3_CACHE:-$HOME/.cache/gpustack-k3}/gpustack-venv (keyed by a stamp);
# the run state (PostgreSQL data, GPUStack data dir, logs, PIDs, env file) lives in $GPUSTACK_K3_RUN
# (default /tmp/gpustack-k3-run) and is recreated by every `start`.
set -euo pipefail

GPUSTACK_VERSION=2.3.0
SCRIPT_REV=1   # bump when the install steps change
PY_BASE="${PYTHON:-python3.11}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${GPUSTACK_K3_CACHE:-$HOME/.cache/gpustack-k3}"
VENV="${GPUSTACK_K3_GPUSTACK_VENV:-$CACHE/gpustack-venv}"
STAMP="$VENV/.gpustack-k3-stamp"
RUN="${GPUSTACK_K3_RUN:-/tmp/gpustack-k3-run}"
NS="${GPUSTACK_K3_NETNS:-gsk3}"
PG_BIN="${PG_BIN:-/usr/lib/postgresql/15/bin}"
PG_PORT=5432
API_PORT=30080
PW_FILE="$RUN/admin_password"
KEY="gpustack==$GPUSTACK_VERSION rev=$SCRIPT_REV python=$($PY_BASE -c 'import sys; print("%d.%d" % sys.version_info[:2])')"

say() { printf '[setup_gpustack %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }
nsexec() { ip netns exec "$NS" "$@"; }

install() {
  case "$(realpath -m "$VENV")/" in
    "$(realpath -m "$HERE/..")"/*) die "refusing to build the venv inside the repo ($VENV); set GPUSTACK_K3_CACHE elsewhere";;
  esac
  if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$KEY" && -x "$VENV/bin/gpustack" ]]; then
    say "cached: $KEY in $VENV"
    return 0
  fi
  local t0=$SECONDS
  say "installing $KEY into $VENV (about 3.5 min cold, 911 MB)"
  rm -rf "$VENV"
  "$PY_BASE" -m venv "$VENV"
  nice -n 10 "$VENV/bin/python" -m pip --disable-pip-version-check install --progress-bar off -q \
    "gpustack==$GPUSTACK_VERSION"
  "$VENV/bin/gpustack" version >/dev/null 2>&1 || "$VENV/bin/python" -c 'import gpustack' \
    || die "gpustack did not import after install"
  echo "$KEY" > "$STAMP"
  say "installed in $((SECONDS - t0)) s"
}

kill_pid_file() {   # kill_pid_file FILE NAME: TERM, wait up to 15 s, then KILL
  local f=$1 name=$2 pid
  [[ -f "$f" ]] || return 0
  pid=$(cat "$f")
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
    say "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    if kill -0 "$pid" 2>/dev/null; then say "$name did not exit, SIGKILL"; kill -KILL "$pid" 2>/dev/null || true; fi
  fi
  rm -f "$f"
}

stop() {
  set +e
  kill_pid_file "$RUN/forward.pid" forwarder
  kill_pid_file "$RUN/gpustack.pid" gpustack
  if [[ -f "$RUN/pg/postmaster.pid" ]]; then
    say "stopping PostgreSQL (pg_ctl stop, pid $(head -1 "$RUN/pg/postmaster.pid"))"
    nsexec runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$RUN/pg" -m fast -w -t 20 stop >/dev/null 2>&1 \
      || kill_pid_file <(head -1 "$RUN/pg/postmaster.pid") postgres
  fi
  # processes still inside the namespace are ours (only this script starts anything there)
  if ip netns list 2>/dev/null | grep -qw "$NS"; then
    local left
    left=$(ip netns pids "$NS" 2>/dev/null)
    # shellcheck disable=SC2086 # $left is a list of pids, one word each
    if [[ -n "$left" ]]; then say "killing leftover pids in $NS: $left"; kill -KILL $left 2>/dev/null; fi
    ip netns delete "$NS" && say "deleted netns $NS"
  fi
  rm -f "$RUN/env"
  set -e
}

start() {
  [[ $EUID -eq 0 ]] || die "start needs root (ip netns, runuser postgres)"
  [[ -x "$PG_BIN/initdb" ]] || die "PostgreSQL 15 not found in $PG_BIN (apt-get install postgresql-15)"
  install
  stop 2>/dev/null || true
  local t0=$SECONDS
  rm -rf "$RUN"; mkdir -p "$RUN"/{data,sock,log}
  chmod 755 "$RUN"

  ip netns add "$NS"
  nsexec ip link set lo up
  say "netns $NS: $(nsexec ip -brief addr | tr -s ' ' | tr '\n' ';')"

  # PostgreSQL 15 as postgres, loopback of the namespace only (gpustack.md §5.3)
  mkdir -p "$RUN/pg"; chown postgres:postgres "$RUN/pg" "$RUN/sock"
  runuser -u postgres -- "$PG_BIN/initdb" -D "$RUN/pg" -A trust -U postgres >"$RUN/log/initdb.log" 2>&1 \
    || { cat "$RUN/log/initdb.log" >&2; die "initdb failed"; }
  touch "$RUN/log/pg.log"; chown postgres "$RUN/log/pg.log"
  nsexec runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$RUN/pg" -w -t 30 -l "$RUN/log/pg.log" \
    -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $RUN/sock -c fsync=off -c shared_buffers=64MB" start >/dev/null \
    || { cat "$RUN/log/pg.log" >&2; die "PostgreSQL did not start"; }
  head -1 "$RUN/pg/postmaster.pid" > "$RUN/postgres.pid"
  nsexec runuser -u postgres -- psql -q -h 127.0.0.1 -p $PG_PORT -U postgres -c 'create database gpustack;'
  say "PostgreSQL up (pid $(cat "$RUN/postgres.pid")) in $((SECONDS - t0)) s"

  # GPUStack server (flags: gpustack.md §5.2)
  local pw
  pw=$(python3 -c 'import secrets; print(secrets.token_urlsafe(18))')
  echo "$pw" > "$PW_FILE"; chmod 600 "$PW_FILE"
  local t1=$SECONDS
  # `ip netns exec` execs in place, so $! is the gpustack server's own PID (a shell function would fork)
  HF_HUB_OFFLINE=1 ip netns exec "$NS" "$VENV/bin/gpustack" start --data-dir "$RUN/data" \
      --database-url "postgresql://postgres@127.0.0.1:$PG_PORT/gpustack" \
      --gateway-mode disabled --disable-builtin-observability --disable-update-check \
      --bootstrap-password "$pw" --advertise-address 127.0.0.1 \
      --api-port $API_PORT --port 30081 --metrics-port 30082 \
      >"$RUN/log/gpustack.log" 2>&1 < /dev/null &
  echo $! > "$RUN/gpustack.pid"
  local ok=
  for _ in $(seq 1 240); do
    if ! kill -0 "$(cat "$RUN/gpustack.pid")" 2>/dev/null; then tail -40 "$RUN/log/gpustack.log" >&2; die "gpustack exited"; fi
    if nsexec curl -fsS -o /dev/null "http://127.0.0.1:$API_PORT/healthz" 2>/dev/null; then ok=1; break; fi
    sleep 0.5
  done
  [[ -n "$ok" ]] || { tail -40 "$RUN/log/gpustack.log" >&2; die "gpustack /healthz not 200 after 120 s"; }
  say "gpustack up (pid $(cat "$RUN/gpustack.pid")) in $((SECONDS - t1)) s; total start $((SECONDS - t0)) s"
  # host-loopback port forwarded into the namespace (.ci/gpustack/forward.py)
  local fport
  fport=$(python3 "$HERE/gpustack/forward.py" --listen "127.0.0.1:${GPUSTACK_K3_FORWARD_PORT:-0}" --netns "$NS" \
          --target "127.0.0.1:$API_PORT" --pid-file "$RUN/forward.pid" 2>>"$RUN/log/forward.log")
  for _ in $(seq 1 40); do curl -fsS -o /dev/null "http://127.0.0.1:$fport/healthz" 2>/dev/null && break; sleep 0.25; done
  curl -fsS -o /dev/null "http://127.0.0.1:$fport/healthz" || die "forwarder on 127.0.0.1:$fport does not reach gpustack"
  say "forwarder 127.0.0.1:$fport -> $NS 127.0.0.1:$API_PORT (pid $(cat "$RUN/forward.pid"))"
  {
    echo "GPUSTACK_NETNS=$NS"
    echo "GPUSTACK_URL=http://127.0.0.1:$fport"
    echo "GPUSTACK_NETNS_URL=http://127.0.0.1:$API_PORT"
    echo "GPUSTACK_ADMIN_PASSWORD_FILE=$PW_FILE"
    echo "GPUSTACK_RUN=$RUN"
    echo "GPUSTACK_PYTHON=$VENV/bin/python"
  } > "$RUN/env"
  cat "$RUN/env"
}

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) stop ;;
  env) if [[ -f "$RUN/env" ]]; then cat "$RUN/env"; else die "no running server ($RUN/env missing)"; fi;;
  *) echo "usage: $0 install|start|stop|env" >&2; exit 2;;
esac
