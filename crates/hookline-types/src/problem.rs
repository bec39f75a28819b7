//! Every error the API answers: RFC 9457 `application/problem+json`.

use serde::{Deserialize, Serialize};

/// A refusal or failure, with a stable machine-readable `code` (`GET /problems`
/// lists them; `type` is the page that explains one) and a human `detail`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// `/problems/{code}`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The status's reason phrase.
    #[serde(default)]
    pub title: String,
    pub status: u16,
    pub code: String,
    pub detail: String,
}
