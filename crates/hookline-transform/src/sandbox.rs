//! The sandbox: worker processes, started on first use, one request each at
//! a time, killed when a run outlives [`TIME_LIMIT`].
//!
//! A run's time starts when its request is written to a worker that said it
//! is ready: neither waiting for a free worker (at most [`WAIT_LIMIT`]) nor
//! starting one (at most [`START_LIMIT`]) counts against the program.
//! Failures that are not the program's — no free worker in time, a worker
//! that would not start, one that died while idle — are
//! [`Error::Unavailable`], worth trying again; only what the program did is
//! [`Error::Program`].

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::value::RawValue;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::Semaphore;

use crate::protocol::{Request, Response, READY};
use crate::{ProgramError, MAX_OUTPUT_BYTES, TIME_LIMIT, WORKER_COMMAND};

/// The longest wait for a free worker.
pub const WAIT_LIMIT: Duration = Duration::from_secs(5);
/// The longest a new worker may take to say it is ready.
pub const START_LIMIT: Duration = Duration::from_secs(10);
/// The longest answer read from a worker: two values at most, escaped, and
/// an error message; a longer one is a broken worker.
const MAX_ANSWER_BYTES: u64 = 6 * MAX_OUTPUT_BYTES as u64;
/// The most of an error message kept (the attempt's response shows it).
pub const MAX_ERROR_BYTES: usize = 2048;

/// Why a program gave no value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The program's fault: it does not compile, it failed, or it ran over a
    /// limit. The same program on the same input would do it again.
    #[error("{0}")]
    Program(ProgramError),
    /// The program's fault too: it used its whole time on the CPU (a
    /// loop, or too much work for one event).
    #[error("{0}")]
    TooSlow(ProgramError),
    /// Not the program's: no worker was free in time, or none could be
    /// started or asked. Worth trying again later.
    #[error("the transform sandbox is unavailable: {0}")]
    Unavailable(String),
}

/// A pool of worker processes running `program transform-worker`.
#[derive(Debug)]
pub struct Sandbox {
    program: PathBuf,
    idle: Mutex<Vec<Worker>>,
    /// At most this many runs at once, one per worker.
    permits: Semaphore,
    workers: usize,
}

#[derive(Debug)]
struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Sandbox {
    /// A sandbox whose workers are `program transform-worker` (the `hookline`
    /// binary), at most `workers` of them.
    pub fn new(program: impl Into<PathBuf>, workers: usize) -> Self {
        Self {
            program: program.into(),
            idle: Mutex::new(Vec::new()),
            permits: Semaphore::new(workers.max(1)),
            workers: workers.max(1),
        }
    }

    /// Compiles `program`: nothing, or what is wrong and where.
    pub async fn check(&self, program: &str) -> Result<(), Error> {
        self.ask(&Request {
            program,
            input: None,
        })
        .await
        .map(drop)
    }

    /// The JSON texts of the first two values `program` gives for `input` (a
    /// transform gives one; two say it gave more than one). `input` must be
    /// compact JSON (one line: requests are lines).
    pub async fn run(&self, program: &str, input: &RawValue) -> Result<Vec<String>, Error> {
        if input.get().contains('\n') {
            return Err(Error::Unavailable(
                "an input of more than one line (not compact JSON)".into(),
            ));
        }
        self.ask(&Request {
            program,
            input: Some(input),
        })
        .await
    }

    async fn ask(&self, request: &Request<'_>) -> Result<Vec<String>, Error> {
        let _permit = tokio::time::timeout(WAIT_LIMIT, self.permits.acquire())
            .await
            .map_err(|_| {
                Error::Unavailable(format!(
                    "all {} workers stayed busy for {} s",
                    self.workers,
                    WAIT_LIMIT.as_secs()
                ))
            })?
            .expect("the semaphore is never closed");
        let mut line = serde_json::to_vec(request).expect("a request serializes");
        line.push(b'\n');
        // A kept worker that died while idle (killed from outside) is
        // dropped; one whose pipe turns out closed gets the request again
        // on a new worker.
        let mut worker = loop {
            let kept = self.idle.lock().expect("idle workers").pop();
            let Some(mut worker) = kept else {
                break self.start().await?;
            };
            if matches!(worker.child.try_wait(), Ok(None)) {
                break worker;
            }
        };
        if write(&mut worker, &line).await.is_err() {
            drop(worker);
            worker = self.start().await?;
            if let Err(e) = write(&mut worker, &line).await {
                return Err(Error::Unavailable(format!(
                    "a new worker took no request: {e}"
                )));
            }
        }
        let cpu_before = cpu_time(&worker.child);
        let mut answer = String::new();
        let mut limited = (&mut worker.stdout).take(MAX_ANSWER_BYTES);
        let read = tokio::time::timeout(TIME_LIMIT, limited.read_line(&mut answer)).await;
        match read {
            Ok(Ok(_)) if answer.ends_with('\n') => {
                match serde_json::from_str::<Response>(&answer) {
                    Ok(Response::Outputs(outputs)) => {
                        self.idle.lock().expect("idle workers").push(worker);
                        Ok(outputs)
                    }
                    Ok(Response::Failed(error)) => {
                        self.idle.lock().expect("idle workers").push(worker);
                        Err(Error::Program(error))
                    }
                    // Killed on drop: a worker that says nonsense is not reused.
                    Ok(Response::Ready) | Err(_) => Err(Error::Unavailable(
                        "a worker answered what is no answer".into(),
                    )),
                }
            }
            Ok(Ok(n)) if n as u64 >= MAX_ANSWER_BYTES => Err(Error::Unavailable(format!(
                "a worker's answer ran past {MAX_ANSWER_BYTES} bytes"
            ))),
            // The end of its output, with or without part of an answer.
            Ok(Ok(_)) | Ok(Err(_)) => Err(ended(worker).await),
            // Killed on drop; tokio reaps it. The time is wall-clock time:
            // a run that did not get the CPU for most of it (a loaded
            // machine) is not the program's fault, and is tried again.
            Err(_) => {
                let used = cpu_before
                    .zip(cpu_time(&worker.child))
                    .map(|(before, after)| after.saturating_sub(before));
                match used {
                    Some(used) if used < TIME_LIMIT / 2 => Err(Error::Unavailable(format!(
                        "a run got {} ms of CPU in its {} ms (the machine is busy)",
                        used.as_millis(),
                        TIME_LIMIT.as_millis()
                    ))),
                    _ => Err(Error::TooSlow(ProgramError::new(format!(
                        "it ran longer than {} ms and was stopped",
                        TIME_LIMIT.as_millis()
                    )))),
                }
            }
        }
    }

    /// A new worker, once it says it is ready.
    async fn start(&self) -> Result<Worker, Error> {
        let unavailable = |why: String| {
            Error::Unavailable(format!(
                "cannot start {} {WORKER_COMMAND}: {why}",
                self.program.display()
            ))
        };
        let mut child = Command::new(&self.program)
            .arg(WORKER_COMMAND)
            .env_clear()
            // mimalloc (the `hookline` binary's allocator) would reserve
            // 1 GiB at once, which the worker's memory limit would then count
            // as its own: smaller steps keep the limit what it says.
            .env("MIMALLOC_ARENA_RESERVE", "16MiB")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| unavailable(e.to_string()))?;
        let mut worker = Worker {
            stdin: child.stdin.take().expect("piped"),
            stdout: BufReader::new(child.stdout.take().expect("piped")),
            child,
        };
        let mut greeting = String::new();
        let mut limited = (&mut worker.stdout).take(1024);
        let read = tokio::time::timeout(START_LIMIT, limited.read_line(&mut greeting)).await;
        match read {
            Ok(Ok(_)) if greeting.trim_end() == READY => Ok(worker),
            Ok(_) => Err(unavailable(format!(
                "it said {:?}, not that it is ready (is it a hookline binary?)",
                greeting.trim_end()
            ))),
            Err(_) => Err(unavailable(format!(
                "not ready in {} s",
                START_LIMIT.as_secs()
            ))),
        }
    }
}

/// A process's CPU time so far (user and system), from `/proc/<pid>/stat`;
/// `None` where there is no such file.
fn cpu_time(child: &Child) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id()?)).ok()?;
    // After the command's name (in parentheses): utime and stime are the
    // 12th and 13th fields, in clock ticks (100 a second on Linux).
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

async fn write(worker: &mut Worker, line: &[u8]) -> std::io::Result<()> {
    worker.stdin.write_all(line).await?;
    worker.stdin.flush().await
}

/// Why a worker stopped answering while it ran a program: killed by a
/// signal (its memory or its stack ran out: the program's doing), or it
/// exited by itself, or it lingers (neither is the program's: a panic is
/// answered as a failure, not an exit).
async fn ended(mut worker: Worker) -> Error {
    drop(worker.stdin);
    let status = match tokio::time::timeout(Duration::from_secs(1), worker.child.wait()).await {
        Ok(status) => status,
        Err(_) => {
            let _ = worker.child.start_kill();
            return Error::Unavailable("a worker stopped answering but did not exit".into());
        }
    };
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        // SIGKILL comes from outside (the kernel's OOM killer, an operator):
        // a program's own end is an abort or a segmentation fault.
        const SIGKILL: i32 = 9;
        if let Ok(Some(signal)) = status.as_ref().map(ExitStatusExt::signal) {
            if signal == SIGKILL {
                return Error::Unavailable("a worker was killed from outside".into());
            }
            return Error::Program(ProgramError::new(format!(
                "it ended its worker process (signal {signal}): it ran out of memory ({} MiB) or recursed too deep",
                crate::MEMORY_LIMIT >> 20
            )));
        }
    }
    Error::Unavailable(match status {
        Ok(status) => format!("a worker exited ({status})"),
        Err(e) => format!("a worker stopped: {e}"),
    })
}
