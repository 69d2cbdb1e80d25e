#!/usr/bin/env bash
# A private dockerd for the Docker test tier (testinfra.md §1b). Idempotent.
#
#   .ci/setup_dockerd.sh start       install docker.io if missing, start dockerd, wait, print DOCKER_HOST=...
#   .ci/setup_dockerd.sh stop        stop the dockerd this script started (by the PID it recorded)
#   .ci/setup_dockerd.sh env         print DOCKER_HOST=unix://... (does not start anything)
#   .ci/setup_dockerd.sh status      exit 0 when the daemon answers on its socket, 1 otherwise
#   .ci/setup_dockerd.sh base-image  build the local Debian base image (debootstrap + docker import)
#                                    unless it is already present; prints BASE_IMAGE=...
#
# The daemon never gets a bridge: --bridge=none --iptables=false --ip6tables=false; containers use
# host or no network. Data root, exec root, pidfile, socket and log live in one work directory,
# by default ${GPUSTACK_K3_CACHE:-$HOME/.cache/gpustack-k3}/dockerd (override: GPUSTACK_K3_DOCKERD_DIR),
# kept between runs so that built images survive. Only the last stdout line is machine-read;
# progress goes to stderr.
set -euo pipefail

CACHE="${GPUSTACK_K3_CACHE:-$HOME/.cache/gpustack-k3}"
WORK="${GPUSTACK_K3_DOCKERD_DIR:-$CACHE/dockerd}"
SOCK="$WORK/docker.sock"
PIDFILE="$WORK/dockerd.pid"
LOG="$WORK/dockerd.log"
BASE_IMAGE="${GPUSTACK_K3_BASE_IMAGE:-gpustack-k3/base:bookworm-py3}"
START_TIMEOUT_S="${GPUSTACK_K3_DOCKERD_TIMEOUT_S:-60}"

say() { printf '[setup_dockerd %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

own_host() { echo "unix://$SOCK"; }

answers() {  # the daemon on our socket answers an API call
  [[ -S "$SOCK" ]] && timeout 10 docker -H "$(own_host)" version --format '{{.Server.Version}}' >/dev/null 2>&1
}

recorded_pid() {  # the PID we recorded, only if it is still a dockerd
  [[ -f "$PIDFILE" ]] || return 1
  local pid; pid="$(cat "$PIDFILE" 2>/dev/null || true)"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [[ "$(cat "/proc/$pid/comm" 2>/dev/null || true)" == dockerd ]] || return 1
  echo "$pid"
}

ensure_packages() {  # apt-get update at most once, then install what is missing
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  local t0=$SECONDS apt=(apt-get -q -o DPkg::Lock::Timeout=600)
  say "installing ${missing[*]} (Debian)"
  local i
  for i in 1 2 3; do "${apt[@]}" update >&2 && break; say "apt-get update failed (try $i), retrying"; sleep 5; done
  DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y --no-install-recommends "${missing[@]}" >&2 \
    || die "apt-get install ${missing[*]} failed"
  say "installed ${missing[*]} in $((SECONDS - t0)) s"
}

cmd_start() {
  if recorded_pid >/dev/null && answers; then
    say "already running (pid $(recorded_pid)) on $SOCK"
    echo "DOCKER_HOST=$(own_host)"; return 0
  fi
  # one apt-get update for both: debootstrap is what `base-image` needs next
  command -v dockerd >/dev/null 2>&1 || ensure_packages docker.io debootstrap
  command -v docker >/dev/null 2>&1 || die "no docker client on PATH after installing docker.io"
  if pid="$(recorded_pid)"; then   # alive but not answering: restart it cleanly
    say "dockerd pid $pid does not answer; stopping it"
    cmd_stop
  fi
  mkdir -p "$WORK/data" "$WORK/exec"
  rm -f "$SOCK" "$PIDFILE"
  [[ -f "$WORK/daemon.json" ]] || echo '{}' > "$WORK/daemon.json"   # ignore any system /etc/docker/daemon.json
  local t0; t0=$(date +%s.%N)
  say "starting dockerd (data-root $WORK/data, socket $SOCK, log $LOG)"
  # setsid: the daemon must not die with the caller's process group (pytest, .ci/run).
  setsid dockerd \
    --bridge=none --iptables=false --ip6tables=false --ip-masq=false \
    --config-file "$WORK/daemon.json" \
    --data-root "$WORK/data" --exec-root "$WORK/exec" \
    --pidfile "$PIDFILE" -H "$(own_host)" \
    >>"$LOG" 2>&1 </dev/null 9>&- &   # 9>&-: the daemon must not inherit (and hold) our lock
  local launched=$!
  echo "$launched" > "$PIDFILE.launch"
  local deadline=$((SECONDS + START_TIMEOUT_S))
  until answers; do
    if ! kill -0 "$launched" 2>/dev/null; then
      tail -n 20 "$LOG" >&2 || true
      die "dockerd exited during start-up (log: $LOG)"
    fi
    if ((SECONDS > deadline)); then
      tail -n 20 "$LOG" >&2 || true
      kill -TERM "$launched" 2>/dev/null || true
      die "dockerd did not answer on $SOCK within ${START_TIMEOUT_S} s (log: $LOG)"
    fi
    sleep 0.2
  done
  # dockerd writes its own pidfile; keep it as the record (it is the launched PID: setsid execs).
  [[ -s "$PIDFILE" ]] || echo "$launched" > "$PIDFILE"
  say "dockerd $(docker -H "$(own_host)" version --format '{{.Server.Version}}') up (pid $(cat "$PIDFILE")) in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s"
  echo "DOCKER_HOST=$(own_host)"
}

cmd_stop() {
  local pid
  if ! pid="$(recorded_pid)"; then
    say "no dockerd recorded in $PIDFILE (nothing to stop)"
    rm -f "$PIDFILE" "$PIDFILE.launch"; return 0
  fi
  say "stopping dockerd pid $pid"
  kill -TERM "$pid"
  local i
  for i in $(seq 1 150); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  if kill -0 "$pid" 2>/dev/null; then
    say "dockerd pid $pid still alive after 30 s; SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$PIDFILE" "$PIDFILE.launch" "$SOCK"
  say "stopped"
}

cmd_status() {
  if answers; then say "running on $SOCK (pid $(recorded_pid || echo '?'))"; return 0; fi
  say "not running on $SOCK"; return 1
}

apt_mirror() {  # the Debian mirror apt is configured with (deb822 or one-line format)
  local m
  m="$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)"
  [[ -n "$m" ]] || m="$(awk '$1=="deb" && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)"
  echo "${m:-http://deb.debian.org/debian}"
}

cmd_base_image() {
  local host="${DOCKER_HOST:-$(own_host)}"
  if docker -H "$host" image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    say "base image $BASE_IMAGE present (cached)"
    echo "BASE_IMAGE=$BASE_IMAGE"; return 0
  fi
  ensure_packages debootstrap
  local t0=$SECONDS suite="${GPUSTACK_K3_BASE_SUITE:-bookworm}" mirror; mirror="$(apt_mirror)"
  local root; root="$(mktemp -d "$WORK/rootfs.XXXXXX")"
  trap 'rm -rf "$root"' EXIT
  say "debootstrap --variant=minbase --include=python3 $suite from $mirror (about 1.5 min)"
  nice -n 10 debootstrap --variant=minbase --include=python3,ca-certificates "$suite" "$root" "$mirror" \
    > "$WORK/debootstrap.log" 2>&1 || { tail -n 20 "$WORK/debootstrap.log" >&2; die "debootstrap failed (log: $WORK/debootstrap.log)"; }
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* \
         "$root"/usr/share/man/* "$root"/usr/share/locale/* "$root"/usr/share/info/*
  say "docker import -> $BASE_IMAGE"
  tar -C "$root" -c . | docker -H "$host" import \
    -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    -c 'ENV LANG=C.UTF-8' -c 'CMD ["python3"]' \
    -m "debootstrap --variant=minbase --include=python3 $suite" - "$BASE_IMAGE" >&2
  rm -rf "$root"; trap - EXIT
  say "base image $BASE_IMAGE built in $((SECONDS - t0)) s"
  echo "BASE_IMAGE=$BASE_IMAGE"
}

locked() {  # one start/stop/build at a time per work directory (parallel CI jobs, pytest sessions)
  mkdir -p "$WORK"
  exec 9>"$WORK/.lock"
  flock -w 900 9 || die "could not lock $WORK/.lock within 900 s"
  "$@"
}

case "${1:-}" in
  start) locked cmd_start ;;
  stop) locked cmd_stop ;;
  env) echo "DOCKER_HOST=$(own_host)" ;;
  status) cmd_status ;;
  base-image) locked cmd_base_image ;;
  *) echo "usage: $0 start|stop|env|status|base-image" >&2; exit 2 ;;
esac
