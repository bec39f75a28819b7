//! What the sandbox and a worker say over the pipe: one JSON object per line.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::ProgramError;

/// What the sandbox asks.
#[derive(Debug, Serialize)]
pub(crate) struct Request<'a> {
    pub program: &'a str,
    /// `None` (`null`): compile only.
    pub input: Option<&'a RawValue>,
}

/// A request as the worker reads it (the program unescaped).
#[derive(Debug, Deserialize)]
pub(crate) struct Incoming {
    pub program: String,
    pub input: Option<Box<RawValue>>,
}

/// What a worker says first, on its own line, once it can take requests.
pub(crate) const READY: &str = "ready";

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Response {
    /// Never sent as an answer (the greeting is [`READY`], a bare line);
    /// read as one, it is a worker out of step.
    Ready,
    /// The JSON texts of the first two values the program gave (a transform
    /// gives one; two say it gave more).
    Outputs(Vec<String>),
    Failed(ProgramError),
}
