#!/bin/sh
# Envoy in front of a small backend, asking rlctl serve about every request: the shipped
# configuration (serve/testdata/envoy/envoy.yaml) and policy (serve/testdata/envoy/edge.hcl,
# translated from envoyproxy/ratelimit's serve/testdata/envoy/ratelimit.yaml). It sends
# five requests from one address and prints each status: the policy lets 3 a minute through
# per address, so the last two are 429.
#
# Needs Go, python3 (the backend), curl, and Envoy: an envoy binary on PATH
# (https://www.envoyproxy.io/docs/envoy/latest/start/install), or Docker, which runs
# envoyproxy/envoy. Run from anywhere: examples/envoy/run.sh. Everything listens on
# loopback but Envoy's own listener (0.0.0.0:10000, as the configuration says).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
tmp=$(mktemp -d)
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

go build -o "$tmp/rlctl" ./cmd/rlctl
"$tmp/rlctl" serve -grpc 127.0.0.1:8081 -http 127.0.0.1:8080 serve/testdata/envoy/edge.hcl &
pids="$pids $!"
(cd "$tmp" && echo ok > index.html && exec python3 -m http.server 9000 --bind 127.0.0.1) >/dev/null 2>&1 &
pids="$pids $!"
if command -v envoy >/dev/null 2>&1; then
	envoy -c serve/testdata/envoy/envoy.yaml --log-level warn &
	pids="$pids $!"
elif command -v docker >/dev/null 2>&1; then
	docker run --rm --name rlctl-envoy-demo --network host \
		-v "$root/serve/testdata/envoy/envoy.yaml:/etc/envoy/envoy.yaml:ro" \
		envoyproxy/envoy:v1.32-latest -c /etc/envoy/envoy.yaml --log-level warn &
	pids="$pids $!"
else
	echo "run.sh: needs envoy on PATH or docker (https://www.envoyproxy.io/docs/envoy/latest/start/install)" >&2
	exit 1
fi

# Wait, at most 30 s, for Envoy to listen and rlctl to answer (a connection, not a request:
# a request through Envoy would count against the limit).
i=0
until python3 -c 'import socket; socket.create_connection(("127.0.0.1", 10000), 1)' 2>/dev/null &&
	curl -s -o /dev/null http://127.0.0.1:8080/healthz; do
	i=$((i + 1))
	if [ "$i" -gt 60 ]; then
		echo "run.sh: Envoy or rlctl serve did not start within 30 s" >&2
		exit 1
	fi
	sleep 0.5
done

for n in 1 2 3 4 5; do
	printf 'request %d: ' "$n"
	curl -s -o /dev/null -w '%{http_code}\n' -H 'x-tenant: acme' http://127.0.0.1:10000/
done
