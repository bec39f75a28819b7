//! Transformations: an endpoint's jq program, run by [jaq] on each delivery.
//!
//! jq is a whole language: a program can loop for ever, recurse until its
//! stack overflows or build a value larger than the machine. jaq has no step
//! budget, so the limits are a process's: programs run in **worker
//! processes** ([`worker`], the `hookline transform-worker` command) that
//! the [`Sandbox`] starts, feeds one request at a time over a pipe, and kills
//! when a run takes longer than [`TIME_LIMIT`]. A worker's address space may
//! grow by [`MEMORY_LIMIT`] (running out aborts it, as does a stack
//! overflow); its environment is empty and it opens no files (jq's `import`
//! is refused). A killed or crashed worker is replaced by the next request.
//!
//! What a program means for a delivery — its input, and its output read as a
//! body, headers and a URL, or as a skip — is `hookline_core::transform`'s.
//!
//! [jaq]: https://github.com/01mf02/jaq

mod jq;
mod protocol;
mod sandbox;
pub mod worker;

pub use sandbox::{Error, Sandbox};

use std::time::Duration;

/// The longest run of one program on one delivery.
pub const TIME_LIMIT: Duration = Duration::from_secs(1);
/// The address space a worker's programs may take (their values), beyond
/// what the worker maps when it starts.
pub const MEMORY_LIMIT: u64 = 512 << 20;
/// The largest value a program may give (its JSON text).
pub const MAX_OUTPUT_BYTES: usize = 1 << 20;
/// The command-line argument that makes the `hookline` binary a worker.
pub const WORKER_COMMAND: &str = "transform-worker";

/// The worker program when none is configured: this very executable (the
/// `hookline` binary, which has the worker command).
pub fn default_worker() -> std::path::PathBuf {
    std::env::current_exe().unwrap_or_else(|_| "hookline".into())
}

/// How many workers a sandbox keeps at most: four per core, up to sixteen.
/// A run is mostly waiting for its turn on a core and for the pipe (a few
/// hundred µs under load), so runs in flight, not cores, bound the rate:
/// with one worker per core the bench's identity program got 4.3k
/// deliveries/s on 2 cores (docs/BENCHMARKS.md). Workers start only when
/// needed, at about 10 MiB each.
pub fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(4, |n| (n.get() * 4).min(16))
}

/// What is wrong with a program, and where when it is a place in its text.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, thiserror::Error)]
#[error("{}{message}", place(*line, *column))]
pub struct ProgramError {
    pub message: String,
    /// 1-based, when the error is at a place in the program's text.
    pub line: Option<u32>,
    pub column: Option<u32>,
}

fn place(line: Option<u32>, column: Option<u32>) -> String {
    match (line, column) {
        (Some(line), Some(column)) => format!("line {line}, column {column}: "),
        _ => String::new(),
    }
}

impl ProgramError {
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            line: None,
            column: None,
        }
    }
}
