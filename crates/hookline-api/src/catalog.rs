//! The event type catalog as publishing sees it: a snapshot in memory with each
//! type's JSON Schema compiled once, reloaded from the store when it is older
//! than [`Catalog::TTL`] (at once after a change made through this process).
//!
//! The catalog is opt-in: while it holds no type, publishes are not checked.
//! Once it holds one, a publish of a type it lacks, of a deprecated type, or
//! with a payload its schema refuses is accepted with a warning in the answer,
//! or refused (422) when the deployment says so (`event_type_check = "refuse"`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hookline_store::{EventType, Store};

use crate::error::{ApiError, ApiResult};
pub(crate) use hookline_types::Warning;

struct Entry {
    deprecated: bool,
    validator: Option<jsonschema::Validator>,
}

/// The catalog at one moment.
#[derive(Default)]
pub(crate) struct Snapshot {
    types: HashMap<String, Entry>,
}

impl Snapshot {
    fn build(types: Vec<EventType>) -> Self {
        let types = types
            .into_iter()
            .map(|t| {
                let validator = t.schema.as_ref().and_then(|schema| {
                    // Schemas are checked when they are stored; one that no longer
                    // compiles (a newer validator) checks nothing rather than everything.
                    jsonschema::validator_for(schema)
                        .map_err(|error| {
                            tracing::warn!(event_type = %t.name, %error, "stored schema does not compile")
                        })
                        .ok()
                });
                (
                    t.name,
                    Entry {
                        deprecated: t.deprecated,
                        validator,
                    },
                )
            })
            .collect();
        Self { types }
    }

    /// What is wrong with publishing `payload` as `event_type`; empty if nothing
    /// (or if the catalog is empty).
    pub(crate) fn check(&self, event_type: &str, payload: &serde_json::Value) -> Vec<Warning> {
        if self.types.is_empty() {
            return Vec::new();
        }
        let Some(entry) = self.types.get(event_type) else {
            return vec![Warning {
                code: "unknown_event_type".into(),
                detail: format!("the event type catalog has no type {event_type:?}"),
            }];
        };
        let mut warnings = Vec::new();
        if entry.deprecated {
            warnings.push(Warning {
                code: "deprecated_event_type".into(),
                detail: format!("{event_type:?} is deprecated in the event type catalog"),
            });
        }
        if let Some(validator) = &entry.validator {
            if let Some(error) = validator.iter_errors(payload).next() {
                warnings.push(Warning {
                    code: "schema_violation".into(),
                    detail: format!(
                        "the payload does not match the schema of {event_type:?}: {error} (at {})",
                        match error.instance_path().to_string() {
                            path if path.is_empty() => "the payload".to_owned(),
                            path => path,
                        }
                    ),
                });
            }
        }
        warnings
    }

    /// The warnings of a publish as the deployment's policy wants them: kept (to
    /// be shown in the answer), or the first refusing one as an error.
    pub(crate) fn judge(
        &self,
        refuse: bool,
        event_type: &str,
        payload: &serde_json::Value,
    ) -> ApiResult<Vec<Warning>> {
        let warnings = self.check(event_type, payload);
        if refuse {
            // Deprecation never refuses: the type still exists.
            if let Some(w) = warnings.iter().find(|w| w.code != "deprecated_event_type") {
                return Err(match w.code.as_ref() {
                    "unknown_event_type" => ApiError::UnknownEventType(w.detail.clone()),
                    _ => ApiError::SchemaViolation(w.detail.clone()),
                });
            }
        }
        Ok(warnings)
    }
}

/// The catalog cache of one API process.
pub(crate) struct Catalog {
    /// The snapshot and when it was loaded (`None`: never, or changed here since).
    current: std::sync::RwLock<(Arc<Snapshot>, Option<Instant>)>,
    /// A reload of a stale snapshot is under way; meanwhile the stale one serves.
    reloading: std::sync::atomic::AtomicBool,
}

impl Default for Catalog {
    fn default() -> Self {
        Self {
            current: std::sync::RwLock::new((Arc::default(), None)),
            reloading: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

impl Catalog {
    /// How stale a snapshot may be: a change made through another process
    /// reaches this one within this long.
    pub(crate) const TTL: Duration = Duration::from_secs(5);

    /// The current snapshot. A stale one is reloaded by one caller while the
    /// others go on with it (no publish waits for a reload); one this process
    /// changed is reloaded before it is used again.
    pub(crate) async fn snapshot(&self, store: &Store) -> ApiResult<Arc<Snapshot>> {
        use std::sync::atomic::Ordering;
        let (snapshot, loaded) = {
            let current = self.current.read().expect("catalog lock poisoned");
            (current.0.clone(), current.1)
        };
        match loaded {
            Some(at) if at.elapsed() < Self::TTL => return Ok(snapshot),
            Some(_) if self.reloading.swap(true, Ordering::AcqRel) => return Ok(snapshot),
            _ => {}
        }
        let reloaded = store.catalog().list_event_types().await;
        self.reloading.store(false, Ordering::Release);
        let fresh = Arc::new(Snapshot::build(reloaded?));
        *self.current.write().expect("catalog lock poisoned") =
            (fresh.clone(), Some(Instant::now()));
        Ok(fresh)
    }

    /// Forgets the snapshot's age (this process changed the catalog).
    pub(crate) fn invalidate(&self) {
        self.current.write().expect("catalog lock poisoned").1 = None;
    }
}

/// Checks a schema and an example before they are stored: the schema must be
/// a JSON Schema the validator compiles, the example must match it.
pub(crate) fn check_definition(
    schema: Option<&serde_json::Value>,
    example: Option<&serde_json::Value>,
) -> ApiResult<()> {
    let Some(schema) = schema else {
        return Ok(());
    };
    let validator = jsonschema::validator_for(schema)
        .map_err(|e| ApiError::Validation(format!("schema is not a usable JSON Schema: {e}")))?;
    if let Some(example) = example {
        if let Some(error) = validator.iter_errors(example).next() {
            return Err(ApiError::Validation(format!(
                "example does not match the schema: {error}"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hookline_core::time::Timestamp;
    use serde_json::json;

    fn catalog() -> Snapshot {
        let at = Timestamp::from_millis(0);
        let kind = |name: &str, schema: Option<serde_json::Value>, deprecated: bool| EventType {
            name: name.into(),
            description: String::new(),
            schema,
            example: None,
            deprecated,
            created_at: at,
            updated_at: at,
        };
        Snapshot::build(vec![
            kind(
                "order.paid",
                Some(
                    json!({"type": "object", "required": ["id"], "properties": {"id": {"type": "integer"}}}),
                ),
                false,
            ),
            kind("order.legacy", None, true),
        ])
    }

    #[test]
    fn an_empty_catalog_checks_nothing() {
        assert!(Snapshot::default().check("anything", &json!(1)).is_empty());
    }

    #[test]
    fn unknown_deprecated_and_invalid_publishes_are_named() {
        let catalog = catalog();
        assert!(catalog.check("order.paid", &json!({"id": 42})).is_empty());
        let codes = |t: &str, p: serde_json::Value| -> Vec<String> {
            catalog
                .check(t, &p)
                .iter()
                .map(|w| w.code.to_string())
                .collect()
        };
        assert_eq!(codes("order.refunded", json!({})), ["unknown_event_type"]);
        assert_eq!(codes("order.legacy", json!({})), ["deprecated_event_type"]);
        assert_eq!(
            codes("order.paid", json!({"id": "42"})),
            ["schema_violation"]
        );
        let detail = &catalog.check("order.paid", &json!({"id": "x"}))[0].detail;
        assert!(detail.contains("/id"), "{detail}");
    }

    #[test]
    fn refusing_refuses_all_but_deprecation() {
        let catalog = catalog();
        assert!(matches!(
            catalog.judge(true, "nope", &json!({})),
            Err(ApiError::UnknownEventType(_))
        ));
        assert!(matches!(
            catalog.judge(true, "order.paid", &json!({})),
            Err(ApiError::SchemaViolation(_))
        ));
        assert_eq!(
            catalog
                .judge(true, "order.legacy", &json!({}))
                .unwrap()
                .len(),
            1
        );
        assert_eq!(catalog.judge(false, "nope", &json!({})).unwrap().len(), 1);
    }

    #[test]
    fn definitions_need_a_compiling_schema_and_a_matching_example() {
        let schema = json!({"type": "object", "required": ["id"]});
        assert!(check_definition(Some(&schema), Some(&json!({"id": 1}))).is_ok());
        assert!(check_definition(Some(&schema), Some(&json!({}))).is_err());
        assert!(check_definition(Some(&json!({"type": 12})), None).is_err());
        assert!(check_definition(None, Some(&json!("anything"))).is_ok());
    }
}
