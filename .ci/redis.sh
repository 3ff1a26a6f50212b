#!/usr/bin/env bash
# A throwaway Redis for the vault's shared-store tests.
#
# Installs redis-server if it is missing (apt-get, quietly), starts one on 127.0.0.1 on a free port in the
# background unless ours is already running, and prints one line on stdout:
#     REDIS_URL=redis://127.0.0.1:PORT/0
# Everything else goes to stderr. Exits 1 (printing nothing on stdout) when no server can be had.
# Usage from .ci/run:   if line=$(.ci/redis.sh); then export "$line"; fi
set -uo pipefail

STATE_DIR="${MCP_INTERCEPTORS_REDIS_DIR:-${TMPDIR:-/tmp}/mcp-interceptors-redis-$(id -u)}"

log() { echo "redis.sh: $*" >&2; }

ping_port() {
    # PING over bash's /dev/tcp, so redis-cli is not needed.
    (
        exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
        printf 'PING\r\n' >&3
        IFS= read -r -t 2 reply <&3 || exit 1
        [[ "$reply" == +PONG* ]]
    ) 2>/dev/null
}

# Already running (started by an earlier call)?
if [[ -f "$STATE_DIR/port" ]]; then
    port=$(cat "$STATE_DIR/port")
    if [[ "$port" =~ ^[0-9]+$ ]] && ping_port "$port"; then
        echo "REDIS_URL=redis://127.0.0.1:$port/0"
        exit 0
    fi
fi

if ! command -v redis-server >/dev/null 2>&1; then
    SUDO=""
    if [[ "$(id -u)" -ne 0 ]]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            SUDO="sudo -n"
        else
            log "redis-server is not installed and this user cannot install it"
            exit 1
        fi
    fi
    if command -v apt-get >/dev/null 2>&1; then
        log "installing redis-server"
        $SUDO apt-get update -qq >/dev/null 2>&1 || true
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server >/dev/null 2>&1 || true
    fi
    if ! command -v redis-server >/dev/null 2>&1; then
        log "redis-server could not be installed"
        exit 1
    fi
fi

mkdir -p "$STATE_DIR" && chmod 700 "$STATE_DIR" || exit 1

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

for _ in 1 2 3 4 5; do
    port=$(free_port) || exit 1
    redis-server --bind 127.0.0.1 --port "$port" --save "" --appendonly no --protected-mode yes \
        --daemonize yes --dir "$STATE_DIR" --pidfile "$STATE_DIR/redis.pid" \
        --logfile "$STATE_DIR/redis.log" >/dev/null 2>&1 || continue
    for _ in $(seq 1 50); do
        if ping_port "$port"; then
            echo "$port" >"$STATE_DIR/port"
            log "redis-server running on 127.0.0.1:$port (pid file $STATE_DIR/redis.pid)"
            echo "REDIS_URL=redis://127.0.0.1:$port/0"
            exit 0
        fi
        sleep 0.1
    done
    log "redis-server on port $port did not answer; retrying"
done
log "could not start redis-server"
exit 1
