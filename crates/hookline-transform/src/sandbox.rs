//! The sandbox: worker processes, started on first use, one request each at
//! a time, killed when a run outlives [`TIME_LIMIT`].

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Mutex;

use serde_json::value::RawValue;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::Semaphore;

use crate::protocol::{Request, Response};
use crate::{ProgramError, TIME_LIMIT, WORKER_COMMAND};

/// Why a program gave no value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The program's fault: it does not compile, it failed, or it ran over a
    /// limit. The same program on the same input would do it again.
    #[error("{0}")]
    Program(ProgramError),
    /// Not the program's: no worker could be started or asked. Worth trying
    /// again later.
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
    /// transform gives one; two say it gave more than one).
    pub async fn run(&self, program: &str, input: &RawValue) -> Result<Vec<String>, Error> {
        self.ask(&Request {
            program,
            input: Some(input),
        })
        .await
    }

    async fn ask(&self, request: &Request<'_>) -> Result<Vec<String>, Error> {
        let _permit = self
            .permits
            .acquire()
            .await
            .expect("the semaphore is never closed");
        let kept = self.idle.lock().expect("idle workers").pop();
        let mut worker = match kept {
            Some(worker) => worker,
            None => self.start()?,
        };
        let mut line = serde_json::to_vec(request).expect("a request serializes");
        line.push(b'\n');
        let exchange = async {
            worker.stdin.write_all(&line).await?;
            worker.stdin.flush().await?;
            let mut answer = String::new();
            match worker.stdout.read_line(&mut answer).await? {
                0 => Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof)),
                _ => Ok(answer),
            }
        };
        match tokio::time::timeout(TIME_LIMIT, exchange).await {
            Ok(Ok(answer)) => {
                let response = serde_json::from_str::<Response>(&answer)
                    .map_err(|e| Error::Unavailable(format!("a worker answered nonsense: {e}")));
                self.idle.lock().expect("idle workers").push(worker);
                match response? {
                    Response::Outputs(outputs) => Ok(outputs),
                    Response::Failed(error) => Err(Error::Program(error)),
                }
            }
            Ok(Err(_)) => Err(ended(worker).await),
            Err(_) => {
                // Killed on drop; tokio reaps it.
                drop(worker);
                Err(Error::Program(ProgramError::new(format!(
                    "it ran longer than {} ms and was stopped",
                    TIME_LIMIT.as_millis()
                ))))
            }
        }
    }

    fn start(&self) -> Result<Worker, Error> {
        let mut child = Command::new(&self.program)
            .arg(WORKER_COMMAND)
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                Error::Unavailable(format!(
                    "cannot start {} {WORKER_COMMAND}: {e}",
                    self.program.display()
                ))
            })?;
        Ok(Worker {
            stdin: child.stdin.take().expect("piped"),
            stdout: BufReader::new(child.stdout.take().expect("piped")),
            child,
        })
    }
}

/// Why a worker stopped answering: killed by a signal while running a
/// program (its memory or its stack ran out), or it exited by itself (it is
/// not a worker: the sandbox's program is wrong).
async fn ended(mut worker: Worker) -> Error {
    drop(worker.stdin);
    let status = worker.child.wait().await;
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Ok(Some(signal)) = status.as_ref().map(ExitStatusExt::signal) {
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
