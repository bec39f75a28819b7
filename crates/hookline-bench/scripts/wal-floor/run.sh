#!/usr/bin/env bash
# The WAL floor of a write-path design, without Hookline: each design's
# happy path in plain SQL (publish a group of events, lease their deliveries,
# record a 200 for each), in the engine's batch sizes, one transaction per
# step, on a fresh database; prints WAL bytes per delivery (pg_current_wal_lsn()
# around the loop) and pg_waldump's record types with --stats.
#
#   crates/hookline-bench/scripts/wal-floor/run.sh [design.sql …]
#
# Defaults: every design here. CYCLES (200) × EVENTS (32) × 10 endpoints.
# PostgreSQL at 127.0.0.1:5432, user postgres; pg_waldump reads the server's
# pg_wal, so run it on the server's machine, as root or postgres.
set -euo pipefail
cd "$(dirname "$0")"
cycles=${CYCLES:-200}; events=${EVENTS:-32}; batch=$((events * 10))
designs=("$@"); [ ${#designs[@]} -eq 0 ] && designs=(current.sql narrow-queue.sql narrow-queue-ff50.sql record-at-end.sql one-record.sql one-record-16-byte-ids.sql)
psql_() { psql -h 127.0.0.1 -U postgres -X -q -v ON_ERROR_STOP=1 "$@"; }
bin=/usr/lib/postgresql/$(psql_ -Atc "SELECT current_setting('server_version_num')::int / 10000")/bin  # the server's own pg_waldump
data=$(psql_ -Atc 'SHOW data_directory')
db=walfloor_$$
trap 'psql_ -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1' EXIT
for design in "${designs[@]}"; do
  psql_ -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
  psql_ -d "$db" -f common.sql -f "$design"
  steps=$(mktemp)
  for _ in $(seq 1 "$cycles"); do
    printf 'SELECT publish(%d);\nSELECT claim(%d);\nSELECT complete(%d);\n' "$events" "$batch" "$batch"
  done >"$steps"
  psql_ -d "$db" -c CHECKPOINT
  from=$(psql_ -d "$db" -Atc 'SELECT pg_current_wal_lsn()')
  psql_ -d "$db" -f "$steps" >/dev/null
  to=$(psql_ -d "$db" -Atc 'SELECT pg_current_wal_lsn()')
  deliveries=$((cycles * batch))
  left=$(psql_ -d "$db" -Atc "SELECT count(*) FROM deliveries WHERE state <> 'succeeded'" 2>/dev/null || echo '?')
  bytes=$(psql_ -d "$db" -Atc "SELECT '$to'::pg_lsn - '$from'::pg_lsn")
  echo "== $design: $(( bytes / deliveries )) WAL bytes per delivery ($deliveries deliveries, $left not succeeded)"
  "$bin/pg_waldump" -p "$data/pg_wal" -s "$from" -e "$to" --stats=record 2>/dev/null \
    | awk 'NR > 3 && $2 > 0 && !/^--/' | sort -k5 -n -r | head -12
  rm -f "$steps"
  psql_ -c "DROP DATABASE $db"
done
