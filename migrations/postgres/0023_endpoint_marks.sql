-- The marks on an endpoint's timeline (crates/hookline-core/src/timeline.rs):
-- what happened to its sending, written in the transaction that made it
-- happen: a completion that opened or closed its breaker or disabled it, an
-- update that turned its switches. Rare (transitions, not attempts), read by
-- time for one endpoint (whose app the caller checked), and removed by retention with the history they mark.
CREATE TABLE endpoint_marks (
    id          TEXT PRIMARY KEY,
    endpoint_id TEXT NOT NULL,
    at          BIGINT NOT NULL,
    kind        TEXT NOT NULL,   -- breaker_opened | breaker_closed | disabled | enabled | paused | resumed
    reason      TEXT             -- a disable's: gone | failing | manual
);
CREATE INDEX endpoint_marks_by_endpoint ON endpoint_marks (endpoint_id, at);
CREATE INDEX endpoint_marks_by_time ON endpoint_marks (at);
