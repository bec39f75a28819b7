-- Payload filters (hookline_core::filter, docs/api.md "Payload filters"): an
-- endpoint's filter as its source text (NULL: every event of its types), and
-- how many events each endpoint's filter dropped, per minute, for its stats
-- (removed by retention with the history).
ALTER TABLE endpoints ADD COLUMN payload_filter TEXT;

CREATE TABLE filter_drops (
    endpoint_id  TEXT NOT NULL,
    minute       BIGINT NOT NULL,          -- unix time in minutes
    dropped      BIGINT NOT NULL,
    PRIMARY KEY (endpoint_id, minute)
);
