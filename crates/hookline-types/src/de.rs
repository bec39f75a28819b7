//! Field (de)serialisers the API's bodies share.

use serde::de::DeserializeOwned;

/// Deserialises a field whose value must be a JSON object (serde would also
/// read a struct from an array of its fields in order).
pub fn object<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: DeserializeOwned,
{
    use serde::de::Error as _;
    optional_object(deserializer)?.ok_or_else(|| D::Error::custom("expected an object"))
}

/// [`object`] for a field that may be absent or `null`.
pub fn optional_object<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: DeserializeOwned,
{
    use serde::de::Error as _;
    use serde::Deserialize;
    match serde_json::Value::deserialize(deserializer)? {
        serde_json::Value::Null => Ok(None),
        value @ serde_json::Value::Object(_) => serde_json::from_value(value)
            .map(Some)
            .map_err(D::Error::custom),
        _ => Err(D::Error::custom("expected an object")),
    }
}

/// Deserialises a field that may be absent (`None`), `null` (`Some(None)`) or
/// set. Serialised with `skip_serializing_if = "Option::is_none"`, the three
/// survive a round trip: absent stays absent, `Some(None)` is `null`.
pub fn double_option<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    use serde::Deserialize;
    Ok(Some(Option::deserialize(deserializer)?))
}
