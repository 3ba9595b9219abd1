#!/usr/bin/env bash
# Run a command with a Docker-compatible container API that testcontainers can use.
#
#   compose/with-engine.sh <command> [args...]
#
# - A reachable Docker engine (DOCKER_HOST, or docker info works): run the command as is.
# - Otherwise podman: installed with runc (apt-get, as root) when missing; a private containers.conf
#   (runc runtime, ulimits within the machine's hard limits) is written to a temporary directory and used through
#   CONTAINERS_CONF; `podman system service` serves the API on a socket in a temporary directory for the
#   command's lifetime and is stopped by its PID on exit, failure included.
#   Podman's storage (/var/lib/containers) keeps the images between runs.
# Exports for the command: DOCKER_HOST, CONTAINER_ENGINE and the TESTCONTAINERS_* settings podman needs.
set -euo pipefail

if [ "$#" -eq 0 ]; then
    echo "usage: $0 <command> [args...]" >&2
    exit 2
fi

fail() {
    echo "with-engine: $*" >&2
    exit 1
}

# No registry is reachable here: the Ryuk reaper image cannot be pulled, and the fixtures remove what they start.
export TESTCONTAINERS_RYUK_DISABLED="${TESTCONTAINERS_RYUK_DISABLED:-true}"

if [ -n "${DOCKER_HOST:-}" ] || { command -v docker >/dev/null && docker info >/dev/null 2>&1; }; then
    export CONTAINER_ENGINE="${CONTAINER_ENGINE:-docker}"
    exec "$@"
fi

if ! command -v podman >/dev/null || ! command -v runc >/dev/null; then
    [ "$(id -u)" -eq 0 ] || fail "no Docker engine, and podman + runc are missing; installing them needs root (apt-get)"
    command -v apt-get >/dev/null || fail "no Docker engine, and podman + runc are missing; no apt-get to install them"
    echo "with-engine: installing podman and runc" >&2
    apt-get update -qq >/dev/null || fail "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc debootstrap >/dev/null \
        || fail "apt-get install podman runc failed"
fi
command -v debootstrap >/dev/null || [ -n "${BASE_IMAGE:-}" ] || [ "$(id -u)" -ne 0 ] \
    || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null \
    || fail "apt-get install debootstrap failed"

# Per run (runs may overlap): the config, the socket and the service's log, in a short path (socket paths are
# limited to 107 bytes); removed on exit.
state="$(mktemp -d "${TMPDIR:-/tmp}/pulsar-txn-proxy-podman.XXXXXX")"
service_pid=""
stop_service() {
    if [ -n "$service_pid" ] && kill -0 "$service_pid" 2>/dev/null; then
        kill "$service_pid" 2>/dev/null || true
        wait "$service_pid" 2>/dev/null || true
    fi
    rm -rf "$state"
}
trap stop_service EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# crun cannot run here (hybrid cgroups): runc. Without CAP_SYS_RESOURCE the container's ulimits must stay within
# this machine's hard limits (measured: nproc above the nofile hard limit is refused too), so both are set to the
# smaller hard limit. `podman build` ignores default_ulimits: build_image.py passes the same as --ulimit.
nofile="$(ulimit -Hn)"; nproc="$(ulimit -Hu)"
[ "$nofile" = unlimited ] && nofile=1048576
[ "$nproc" = unlimited ] && nproc=1048576
limit=$(( nofile < nproc ? nofile : nproc ))
cat >"$state/containers.conf" <<EOF
# Written by compose/with-engine.sh.
[containers]
default_ulimits = ["nofile=${limit}:${limit}", "nproc=${limit}:${limit}"]

[engine]
runtime = "runc"
EOF
export CONTAINERS_CONF="$state/containers.conf"

sock="$state/podman.sock"
podman system service --time=0 "unix://$sock" >"$state/service.log" 2>&1 &
service_pid=$!

for _ in $(seq 1 100); do
    if curl -sf --unix-socket "$sock" http://d/_ping >/dev/null 2>&1; then
        break
    fi
    kill -0 "$service_pid" 2>/dev/null || fail "podman system service exited: $(cat "$state/service.log")"
    sleep 0.1
done
curl -sf --unix-socket "$sock" http://d/_ping >/dev/null 2>&1 \
    || fail "podman system service did not answer on $sock: $(cat "$state/service.log")"

export DOCKER_HOST="unix://$sock"
export CONTAINER_ENGINE=podman
# This machine has /.dockerenv, so testcontainers would assume it runs inside a container and use gateway-IP mode,
# which fails on podman's inspect output: use the published ports on the loopback address.
export TESTCONTAINERS_CONNECTION_MODE="${TESTCONTAINERS_CONNECTION_MODE:-docker_host}"
export TESTCONTAINERS_HOST_OVERRIDE="${TESTCONTAINERS_HOST_OVERRIDE:-127.0.0.1}"
"$@"
