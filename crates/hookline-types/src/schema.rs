//! Schemas that the derives cannot state (patterns, nullable strings, shapes
//! that a Rust type does not spell), for `#[schema(schema_with = …)]`. Each
//! rule is written once here; the API's OpenAPI document uses the same ones.

use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, SchemaType, Type};

/// An id of one kind: its prefix and a ULID (whose first character is 0–7).
#[macro_export]
macro_rules! id_pattern {
    ($prefix:literal) => {
        concat!("^", $prefix, "[0-7][0-9A-HJKMNP-TV-Z]{25}$")
    };
}

/// A free-text name (event type, ordering key): 1 to 256 characters
/// (`minLength`/`maxLength`) without control characters.
pub const NAME_PATTERN: &str = "^[^\\u0000-\\u001f\\u007f-\\u009f]*$";

/// An RFC 3339 UTC time as the API reads it (`2026-12-01T09:30:00Z`, with
/// optional fractions of a second). Days stop at 28 so that every string the
/// pattern allows is a real date.
pub const TIME_PATTERN: &str = "^(19[7-9][0-9]|20[0-9]{2})-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,3})?Z$";

/// A time certainly in the future (years 2100 to 2999), for `expires_at`.
pub const FUTURE_PATTERN: &str = "^2[1-9][0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]Z$";

/// An endpoint URL as the document states it (a safe subset of what the API accepts).
pub const URL_PATTERN: &str = r"^https?://([a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?\.){0,3}[a-z]{2,10}(:[1-9][0-9]{0,3})?(/[A-Za-z0-9._~-]{0,20}){0,4}$";

pub fn string() -> ObjectBuilder {
    ObjectBuilder::new().schema_type(Type::String)
}

/// A name field's schema ([`NAME_PATTERN`], 1 to 256 characters).
pub fn name() -> utoipa::openapi::Object {
    string()
        .min_length(Some(1))
        .max_length(Some(256))
        .pattern(Some(NAME_PATTERN))
        .build()
}

/// [`name`] for a field that may be absent or `null`.
pub fn optional_name() -> utoipa::openapi::Object {
    nullable(name())
}

/// An optional RFC 3339 UTC time ([`TIME_PATTERN`]).
pub fn optional_time() -> utoipa::openapi::Object {
    nullable(
        string()
            .pattern(Some(TIME_PATTERN))
            .description(Some("an RFC 3339 UTC time such as 2026-12-01T09:30:00Z"))
            .build(),
    )
}

fn nullable(mut schema: utoipa::openapi::Object) -> utoipa::openapi::Object {
    schema.schema_type = SchemaType::from_iter([Type::String, Type::Null]);
    schema
}

/// A JSON Schema (2020-12) document: an object, or `true`/`false`.
pub fn json_schema_document() -> utoipa::openapi::Object {
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([
            Type::Object,
            Type::Boolean,
            Type::Null,
        ]))
        .description(Some("a JSON Schema (2020-12): an object, or true/false"))
        .build()
}

/// Custom headers as the document states them (a safe subset of what
/// `hookline_core::custom_headers` accepts: `x-` names, visible values).
pub fn custom_headers() -> utoipa::openapi::Object {
    let string = |pattern: &str| string().pattern(Some(pattern));
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Object, Type::Null]))
        .description(Some(
            "headers added to every request: at most 20, 4 KiB together; not webhook-*, \
             hookline-*, hop-by-hop or framing headers",
        ))
        .max_properties(Some(20))
        .property_names(Some(string("^x-[a-z0-9-]{1,30}$")))
        .additional_properties(Some(AdditionalProperties::RefOr(
            string("^[!-~]([ !-~]{0,60}[!-~])?$").build().into(),
        )))
        .build()
}

/// Outbound authentication as the document states it: one of `oauth2`,
/// `basic`, `bearer` and `tls` (the API takes `tls` beside one of the others,
/// too), each in a safe subset of what `hookline_core::outbound_auth` accepts.
pub fn outbound_auth() -> utoipa::openapi::Object {
    let string = |pattern: &str| string().pattern(Some(pattern));
    let object = |fields: &[(&str, &str)], required: &[&str]| {
        let mut object = ObjectBuilder::new()
            .schema_type(Type::Object)
            .additional_properties(Some(AdditionalProperties::FreeForm(false)));
        for (name, pattern) in fields {
            object = object.property(*name, string(pattern));
        }
        for name in required {
            object = object.required(*name);
        }
        object
    };
    let token = r"^[A-Za-z0-9]{1,20}$";
    let pem = |label: &str| {
        format!(r"^-----BEGIN {label}-----\n([A-Za-z0-9]{{4}}){{1,16}}\n-----END {label}-----\n$")
    };
    let (certificate, key) = (pem("CERTIFICATE"), pem("PRIVATE KEY"));
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Object, Type::Null]))
        .description(Some(
            "how Hookline authenticates to the receiver besides the signature (docs/api.md, \
             \"Outbound authentication\"): at most one of oauth2, basic and bearer, and tls; \
             sealed at rest; secrets show as `…` to a key without the `secrets` capability",
        ))
        .min_properties(Some(1))
        .max_properties(Some(1))
        .additional_properties(Some(AdditionalProperties::FreeForm(false)))
        .property(
            "oauth2",
            object(
                &[
                    ("token_url", URL_PATTERN),
                    ("client_id", token),
                    ("client_secret", token),
                    ("scope", token),
                    ("audience", token),
                ],
                &["token_url", "client_id", "client_secret"],
            ),
        )
        .property(
            "basic",
            object(
                &[("username", token), ("password", token)],
                &["username", "password"],
            ),
        )
        .property("bearer", string(token))
        .property(
            "tls",
            object(
                &[
                    ("client_certificate", &certificate),
                    ("client_key", &key),
                    ("server_ca", &certificate),
                ],
                &["client_certificate", "client_key"],
            ),
        )
        .build()
}

/// `POST …/notifications`'s body: a mailbox for `email`, a URL for a chat
/// (one shape per kind, so that every body the document allows is one the
/// API takes).
pub fn notification_channel() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ArrayBuilder, OneOfBuilder};
    let events = || {
        ArrayBuilder::new()
            .items(
                string().enum_values(Some(
                    crate::notifications::NotificationEvent::ALL
                        .map(|e| serde_json::to_value(e).expect("an event serializes")),
                )),
            )
            .min_items(Some(1))
            .max_items(Some(6))
            .description(Some("what to be told of; absent: all of it"))
            .build()
    };
    let shape = |kinds: &[&str], to: utoipa::openapi::Object| {
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .additional_properties(Some(AdditionalProperties::FreeForm(false)))
            .property("kind", string().enum_values(Some(kinds.iter().copied())))
            .property("to", to)
            .property("events", events())
            .required("kind")
            .required("to")
    };
    let mailbox = string()
        .pattern(Some(r"^[a-z0-9]{1,20}@[a-z0-9]{1,20}\.[a-z]{2,10}$"))
        .description(Some("the mailbox"))
        .build();
    let url = string()
        .pattern(Some(URL_PATTERN))
        .description(Some("the chat's incoming-webhook URL"))
        .build();
    OneOfBuilder::new()
        .item(shape(&["email"], mailbox))
        .item(shape(&["slack", "teams", "discord"], url))
        .build()
        .into()
}
