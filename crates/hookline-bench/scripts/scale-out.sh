#!/usr/bin/env bash
# Scale-out run on PostgreSQL: one `hookline api` and N `hookline dispatcher`
# processes on a fresh database, loaded by hookline-bench through --url.
#
#   crates/hookline-bench/scripts/scale-out.sh [DISPATCHERS] [bench options…]
#
# Defaults: 2 dispatchers, `--events 20000 --endpoints 10`. Binaries from
# target/release (HOOKLINE_BIN / BENCH_BIN override); PostgreSQL at
# 127.0.0.1:5432, user postgres (POSTGRES_ADMIN_URL overrides).
set -euo pipefail
n=${1:-2}; shift || true
opts=("$@"); [ ${#opts[@]} -eq 0 ] && opts=(--events 20000 --endpoints 10)
bin=${HOOKLINE_BIN:-target/release/hookline}
bench=${BENCH_BIN:-target/release/hookline-bench}
admin=${POSTGRES_ADMIN_URL:-postgres://postgres@127.0.0.1:5432/postgres}
db=hookline_scale_$$
psql -q "$admin" -c "CREATE DATABASE $db"
export HOOKLINE_DATABASE_URL=${admin%/*}/$db HOOKLINE_ADMIN_TOKEN=hk_scale_$$ HOOKLINE_ALLOW_PRIVATE_DESTINATIONS=true
"$bin" migrate >/dev/null
pids=()
cleanup() { kill -TERM "${pids[@]}" 2>/dev/null; wait; psql -q "$admin" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)"; }
trap cleanup EXIT
HOOKLINE_LISTEN=127.0.0.1:18081 "$bin" api >/tmp/scale-out-api.log 2>&1 & pids+=($!)
# Every role listens (a dispatcher for its probes and metrics): one port each.
for i in $(seq 1 "$n"); do HOOKLINE_LISTEN=127.0.0.1:$((18081 + i)) "$bin" dispatcher >"/tmp/scale-out-dispatcher-$i.log" 2>&1 & pids+=($!); done
for _ in $(seq 1 50); do curl -sf 127.0.0.1:18081/healthz >/dev/null && break; sleep 0.2; done
"$bench" --url http://127.0.0.1:18081 --token "$HOOKLINE_ADMIN_TOKEN" --quiet "${opts[@]}"
