#!/usr/bin/env python3
"""The bytes SQLite writes per delivery for each write-path design, without
Hookline: the same happy path as run.sh (publish EVENTS events x 10
endpoints, lease them, record a 200 for each; one transaction per step) in
WAL mode with synchronous=FULL, as Hookline opens its file. Bytes are this
process's write_bytes from /proc/self/io over the loop: WAL frames and
checkpoints into the database file.

    python3 crates/hookline-bench/scripts/wal-floor/sqlite-floor.py [CYCLES] [EVENTS]
"""
import os, random, sqlite3, sys, tempfile, time

CYCLES = int(sys.argv[1]) if len(sys.argv) > 1 else 200
EVENTS = int(sys.argv[2]) if len(sys.argv) > 2 else 32
ENDPOINTS = 10
APP = "app_01M915N4XSK9ZKENMFQ1XXVT90"
DETAIL = ('{"url":"http://127.0.0.1:35183/e3","signature":"v1,%s=","response_headers":'
          '[["content-length","0"],["date","Fri, 04 Dec 2026 18:39:22 GMT"]],'
          '"response_truncated":false,"trigger":"first"}')
tick = 0


def ulid(prefix):
    global tick
    tick += 1
    return prefix + format(tick, "010X") + "%016X" % random.getrandbits(64)


def uid():
    global tick
    tick += 1
    return tick.to_bytes(6, "big") + random.getrandbits(80).to_bytes(10, "big")


def now():
    return int(time.time() * 1000)


def payload():
    return os.urandom(512).hex().encode()


def detail():
    return DETAIL % ("%032x" % random.getrandbits(128))


CURRENT = """
CREATE TABLE events (id TEXT PRIMARY KEY, app_id TEXT NOT NULL, event_type TEXT NOT NULL,
  ordering_key TEXT, body BLOB NOT NULL, created_at INTEGER NOT NULL);
CREATE INDEX events_by_app ON events (app_id, id);
CREATE TABLE deliveries (id TEXT PRIMARY KEY, app_id TEXT NOT NULL, event_id TEXT NOT NULL,
  endpoint_id TEXT NOT NULL, state TEXT NOT NULL, due_at INTEGER NOT NULL, lease_token TEXT,
  attempts INTEGER NOT NULL, round_started_at INTEGER NOT NULL, last_attempt_at INTEGER,
  dead_reason TEXT, dead_at INTEGER, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
  ordering_key TEXT, sequence INTEGER);
CREATE INDEX deliveries_by_endpoint ON deliveries (endpoint_id);
CREATE INDEX deliveries_by_event ON deliveries (event_id);
CREATE INDEX deliveries_dlq ON deliveries (app_id, dead_at, id) WHERE state = 'dead';
CREATE INDEX deliveries_due_fresh ON deliveries (due_at) WHERE state = 'pending' AND attempts = 0;
CREATE INDEX deliveries_due_retry ON deliveries (due_at) WHERE state = 'pending' AND attempts > 0;
CREATE INDEX deliveries_endpoint_pending ON deliveries (endpoint_id, due_at) WHERE state = 'pending';
CREATE INDEX deliveries_leased ON deliveries (due_at) WHERE state = 'in_flight';
CREATE INDEX deliveries_partition ON deliveries (endpoint_id, ordering_key, sequence)
  WHERE ordering_key IS NOT NULL AND state <> 'succeeded';
CREATE TABLE attempts (id TEXT PRIMARY KEY, delivery_id TEXT NOT NULL, app_id TEXT NOT NULL,
  endpoint_id TEXT NOT NULL, attempt_number INTEGER NOT NULL, started_at INTEGER NOT NULL,
  duration_ms INTEGER NOT NULL, status_code INTEGER, response_body TEXT, error_kind TEXT,
  error_message TEXT, verdict TEXT NOT NULL, next_attempt_at INTEGER, dead_reason TEXT, detail TEXT);
CREATE INDEX attempts_by_delivery ON attempts (delivery_id, id);
CREATE INDEX attempts_by_endpoint ON attempts (endpoint_id, id);
"""


def current(db, endpoints, n):
    def publish():
        for _ in range(EVENTS):
            e, t = ulid("msg_"), now()
            db.execute("INSERT INTO events VALUES (?, ?, 'order.paid', NULL, ?, ?)", (e, APP, payload(), t))
            db.executemany(
                "INSERT INTO deliveries (id, app_id, event_id, endpoint_id, state, due_at, attempts,"
                " round_started_at, created_at, updated_at) VALUES (?, ?, ?, ?, 'pending', ?, 0, ?, ?, ?)",
                [(ulid("dlv_"), APP, e, p, t, t, t, t) for p in endpoints])

    def claim():
        db.execute(
            "UPDATE deliveries SET state = 'in_flight', due_at = ?, lease_token = 'lease_01M915N4ZG9C70',"
            " updated_at = ? WHERE id IN (SELECT id FROM deliveries WHERE state = 'pending'"
            " AND attempts = 0 ORDER BY due_at LIMIT ?)", (now() + 30000, now(), n))

    def complete():
        done = db.execute("SELECT id, endpoint_id FROM deliveries WHERE state = 'in_flight'"
                          " ORDER BY due_at LIMIT ?", (n,)).fetchall()
        db.executemany("INSERT INTO attempts VALUES (?, ?, ?, ?, 1, ?, 3, 200, '', NULL, NULL,"
                       " 'delivered', NULL, NULL, ?)",
                       [(ulid("att_"), d, APP, p, now(), detail()) for d, p in done])
        db.executemany("UPDATE deliveries SET state = 'succeeded', attempts = 1, last_attempt_at = ?,"
                       " lease_token = NULL, updated_at = ? WHERE id = ?",
                       [(now(), now(), d) for d, _ in done])
    return publish, claim, complete


def one_record(ids):
    def schema(kind):
        return f"""
CREATE TABLE events (id {kind} PRIMARY KEY, app_id {kind} NOT NULL, event_type TEXT NOT NULL,
  ordering_key TEXT, body BLOB NOT NULL, created_at INTEGER NOT NULL);
CREATE INDEX events_by_app ON events (app_id, id);
CREATE TABLE event_queue (event_id {kind} PRIMARY KEY, due_at INTEGER NOT NULL,
  leased_until INTEGER, lease_token TEXT);
CREATE INDEX event_queue_due ON event_queue (due_at) WHERE leased_until IS NULL;
CREATE INDEX event_queue_leased ON event_queue (leased_until) WHERE leased_until IS NOT NULL;
CREATE TABLE deliveries (id {kind} PRIMARY KEY, app_id {kind} NOT NULL, event_id {kind} NOT NULL,
  endpoint_id {kind} NOT NULL, created_at INTEGER NOT NULL, state TEXT NOT NULL,
  attempts INTEGER NOT NULL, last_attempt_at INTEGER, last_status INTEGER, duration_ms INTEGER,
  detail TEXT, updated_at INTEGER NOT NULL);
CREATE INDEX deliveries_by_endpoint ON deliveries (endpoint_id, id);
CREATE INDEX deliveries_by_event ON deliveries (event_id);
"""
    make = (lambda prefix: ulid(prefix)) if ids == "text" else (lambda prefix: uid())
    app = APP if ids == "text" else uid()

    def design(db, endpoints, n):
        def publish():
            rows = [(make("msg_"), now()) for _ in range(EVENTS)]
            db.executemany("INSERT INTO events VALUES (?, ?, 'order.paid', NULL, ?, ?)",
                           [(e, app, payload(), t) for e, t in rows])
            db.executemany("INSERT INTO event_queue (event_id, due_at) VALUES (?, ?)", rows)

        def claim():
            db.execute("UPDATE event_queue SET leased_until = ?, lease_token = 'lease_01M915N4ZG9C70'"
                       " WHERE event_id IN (SELECT event_id FROM event_queue WHERE leased_until IS NULL"
                       " ORDER BY due_at LIMIT ?)", (now() + 30000, n // ENDPOINTS))

        def complete():
            done = [r[0] for r in db.execute(
                "SELECT event_id FROM event_queue WHERE leased_until IS NOT NULL"
                " ORDER BY leased_until LIMIT ?", (n // ENDPOINTS,))]
            db.executemany("DELETE FROM event_queue WHERE event_id = ?", [(e,) for e in done])
            db.executemany("INSERT INTO deliveries VALUES (?, ?, ?, ?, ?, 'succeeded', 1, ?, 200, 3, ?, ?)",
                           [(make("dlv_"), app, e, p, now(), now(), detail(), now())
                            for e in done for p in endpoints])
        return publish, claim, complete
    return schema("TEXT" if ids == "text" else "BLOB"), design


def write_bytes():
    with open("/proc/self/io") as io:
        for line in io:
            if line.startswith("write_bytes:"):
                return int(line.split()[1])


def measure(name, schema, design, text_ids=True):
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        db = sqlite3.connect(os.path.join(tmp, "floor.db"), isolation_level=None)
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = FULL")
        db.executescript(schema)
        endpoints = [ulid("ep_") if text_ids else uid() for _ in range(ENDPOINTS)]
        publish, claim, complete = design(db, endpoints, EVENTS * ENDPOINTS)
        before = write_bytes()
        for _ in range(CYCLES):
            for step in (publish, claim, complete):
                db.execute("BEGIN IMMEDIATE")
                step()
                db.execute("COMMIT")
        db.close()  # the last checkpoint counts too
        written = write_bytes() - before
    deliveries = CYCLES * EVENTS * ENDPOINTS
    print(f"== {name}: {written // deliveries} bytes written per delivery ({deliveries} deliveries)")


measure("current", CURRENT, current)
schema, design = one_record("text")
measure("one-record", schema, design)
schema, design = one_record("blob")
measure("one-record-16-byte-ids", schema, design, text_ids=False)
