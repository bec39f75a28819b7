-- Parts of an event's fan-out (docs/engine-v4.md, "Parts"). A target that a
-- claim leased but could not send (its endpoint had no room) moves to a new
-- `fanout` row of the same event, due now, instead of a delivery row of its
-- own: one narrow row with three index entries for all such targets of the
-- event, where a delivery row carries ten. A part keeps each target's place,
-- so delivery ids stay derived from the event and the place. The publish
-- writes part 0; a part split off a row is keyed by its first place + 1.
ALTER TABLE fanout ADD COLUMN part BIGINT NOT NULL DEFAULT 0;
ALTER TABLE fanout DROP CONSTRAINT fanout_pkey;
ALTER TABLE fanout ADD CONSTRAINT fanout_pkey PRIMARY KEY (event_id, part);
