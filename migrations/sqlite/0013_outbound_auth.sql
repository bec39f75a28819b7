-- Outbound authentication (hookline_core::outbound_auth): an endpoint's OAuth2
-- client credentials, Basic or bearer credentials and client TLS, sealed at
-- rest as one JSON value like its custom headers.
ALTER TABLE endpoints ADD COLUMN auth TEXT;
