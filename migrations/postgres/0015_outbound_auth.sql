-- Outbound authentication (hookline_core::outbound_auth): an endpoint's OAuth2
-- client credentials, Basic or bearer credentials and client TLS, sealed at
-- rest as one JSON value like its custom headers; and a new attempt error
-- kind, `auth_error`, for an attempt whose OAuth2 token could not be had.
ALTER TABLE endpoints ADD COLUMN auth TEXT;

ALTER TABLE attempts DROP CONSTRAINT attempts_error_kind_known;
ALTER TABLE attempts
    ADD CONSTRAINT attempts_error_kind_known
        CHECK (error_kind IS NULL OR error_kind IN ('timeout', 'connect', 'dns', 'tls', 'io',
                                                    'destination_forbidden', 'auth_error')) NOT VALID;
ALTER TABLE attempts VALIDATE CONSTRAINT attempts_error_kind_known;
