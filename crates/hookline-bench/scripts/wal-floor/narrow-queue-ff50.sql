-- As narrow-queue.sql at fillfactor 50: every delivery page keeps room for
-- each of its rows' one new version, so every terminal update is HOT.
\ir narrow-queue.sql
ALTER TABLE deliveries SET (fillfactor = 50);
