-- Parts of an event's fan-out (docs/engine-v4.md, "Parts"). A target that a
-- claim leased but could not send (its endpoint had no room) moves to a new
-- `fanout` row of the same event, due now, instead of a delivery row of its
-- own: one narrow row with three index entries for all such targets of the
-- event, where a delivery row carries ten. A part keeps each target's place,
-- so delivery ids stay derived from the event and the place. The publish
-- writes part 0; a part split off a row is keyed by its first place + 1.
CREATE TABLE fanout_parts (
    event_id     TEXT NOT NULL,
    part         BIGINT NOT NULL DEFAULT 0,
    app_id       TEXT NOT NULL,
    -- ',ep_a,,ep_c,': the endpoint at each place; empty where the delivery
    -- has a row of its own, or where another part of the event holds it.
    targets      TEXT NOT NULL,
    n            BIGINT NOT NULL,  -- the places not empty
    due_at       BIGINT NOT NULL,  -- not leased: when due; leased: when the lease ends
    lease_token  TEXT,
    -- Leased before and given back: some targets may have rows already.
    reclaimed    BIGINT NOT NULL DEFAULT 0,
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (event_id, part)
);
INSERT INTO fanout_parts (event_id, part, app_id, targets, n, due_at, lease_token, reclaimed, created_at)
    SELECT event_id, 0, app_id, targets, n, due_at, lease_token, reclaimed, created_at FROM fanout;
DROP TABLE fanout;
ALTER TABLE fanout_parts RENAME TO fanout;
CREATE INDEX fanout_due ON fanout (due_at) WHERE lease_token IS NULL;
CREATE INDEX fanout_leased ON fanout (due_at) WHERE lease_token IS NOT NULL;
