//! The worker process: `hookline transform-worker`.
//!
//! It reads requests from stdin and answers each on stdout, one line each,
//! until stdin closes. Compiled programs are kept (the last
//! [`KEPT_PROGRAMS`]), so a program is compiled once per worker, not once per
//! delivery.

use std::collections::HashMap;
use std::io::{BufRead, Write};

use crate::protocol::{Incoming, Response, READY};
use crate::sandbox::MAX_ERROR_BYTES;
use crate::{jq, ProgramError, MAX_OUTPUT_BYTES, MEMORY_LIMIT};

/// Compiled programs a worker keeps.
pub const KEPT_PROGRAMS: usize = 256;
/// The stack the programs run on: deep enough for any sane recursion; a
/// deeper one overflows it and the worker dies.
const STACK: usize = 64 << 20;

/// Serves requests until stdin closes. Call it from `main`, before anything
/// else starts (an async runtime's threads would take address space), and
/// exit after.
pub fn serve() -> std::io::Result<()> {
    // A panic inside jaq (an arithmetic overflow it does not check) is the
    // program's failure, answered as one (`serve_on`): nothing to print,
    // nowhere to print it.
    std::panic::set_hook(Box::new(|_| {}));
    std::thread::Builder::new()
        .name("transform".into())
        .stack_size(STACK)
        .spawn(|| {
            // Counted from here: the program's own mapping and this stack are
            // not the programs' to use.
            limit_memory(MEMORY_LIMIT);
            serve_on(std::io::stdin().lock(), std::io::stdout().lock())
        })?
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::other("the transform worker panicked")))
}

fn serve_on(input: impl BufRead, mut output: impl Write) -> std::io::Result<()> {
    writeln!(output, "{READY}")?;
    output.flush()?;
    let mut kept: HashMap<String, jq::Filter> = HashMap::new();
    for line in input.lines() {
        let line = line?;
        let response = match serde_json::from_str::<Incoming>(&line) {
            Ok(request) => {
                let answered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    answer(&mut kept, &request)
                }));
                answered.unwrap_or_else(|panic| {
                    let said = panic
                        .downcast_ref::<&str>()
                        .map(|s| (*s).to_owned())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_default();
                    kept.remove(&request.program);
                    Response::Failed(ProgramError::new(format!(
                        "it broke the interpreter: {said}"
                    )))
                })
            }
            Err(e) => Response::Failed(ProgramError::new(format!("a bad request: {e}"))),
        };
        let response = match response {
            Response::Failed(mut error) => {
                error.message = crate::jq::cut(&error.message, MAX_ERROR_BYTES);
                Response::Failed(error)
            }
            response => response,
        };
        serde_json::to_writer(&mut output, &response)?;
        output.write_all(b"\n")?;
        output.flush()?;
    }
    Ok(())
}

fn answer(kept: &mut HashMap<String, jq::Filter>, request: &Incoming) -> Response {
    if !kept.contains_key(&request.program) {
        match jq::compile(&request.program) {
            Ok(filter) => {
                if kept.len() >= KEPT_PROGRAMS {
                    kept.clear();
                }
                kept.insert(request.program.clone(), filter);
            }
            Err(error) => return Response::Failed(error),
        }
    }
    let Some(input) = &request.input else {
        return Response::Outputs(Vec::new());
    };
    match jq::run(&kept[&request.program], input.get(), 2, MAX_OUTPUT_BYTES) {
        Ok(outputs) => Response::Outputs(outputs),
        Err(error) => Response::Failed(error),
    }
}

/// Caps the process's address space at what it maps now plus `bytes`: an
/// allocation past it fails, and Rust aborts the process.
fn limit_memory(bytes: u64) {
    #[cfg(unix)]
    {
        use rustix::process::{setrlimit, Resource, Rlimit};
        // The first field of statm: the address space's size, in pages.
        let mapped = std::fs::read_to_string("/proc/self/statm")
            .ok()
            .and_then(|statm| statm.split_whitespace().next()?.parse::<u64>().ok())
            .map_or(0, |pages| pages * rustix::param::page_size() as u64);
        let limit = Rlimit {
            current: Some(mapped + bytes),
            maximum: Some(mapped + bytes),
        };
        // Without the limit a runaway is still killed on time, only later.
        let _ = setrlimit(Resource::As, limit);
    }
    #[cfg(not(unix))]
    let _ = bytes;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_answers_each_line_and_keeps_compiled_programs() {
        let requests = concat!(
            r#"{"program":".a","input":{"a":1}}"#,
            "\n",
            r#"{"program":".a","input":{"a":[2]}}"#,
            "\n",
            r#"{"program":"(","input":null}"#,
            "\n",
            r#"{"program":"\"a\\u0062\"","input":1}"#,
            "\n",
            "not json\n",
        );
        let mut out = Vec::new();
        serve_on(requests.as_bytes(), &mut out).unwrap();
        let mut lines: Vec<&str> = std::str::from_utf8(&out).unwrap().lines().collect();
        assert_eq!(lines.remove(0), READY, "the greeting comes first");
        assert_eq!(lines[0], r#"{"outputs":["1"]}"#);
        assert_eq!(lines[1], r#"{"outputs":["[2]"]}"#);
        assert!(
            lines[2].starts_with(r#"{"failed":{"message":"expected"#),
            "{}",
            lines[2]
        );
        // Escapes in the program are read as JSON reads them.
        assert_eq!(lines[3], r#"{"outputs":["\"ab\""]}"#);
        assert!(lines[4].contains("a bad request"), "{}", lines[4]);
        assert_eq!(lines.len(), 5);
    }

    #[test]
    fn a_panic_in_the_interpreter_and_a_long_error_are_answered_as_failures() {
        let requests = concat!(
            r#"{"program":"\"ab\" * 9223372036854775807","input":1}"#,
            "\n",
            r#"{"program":"error(\"x\" * 100000)","input":1}"#,
            "\n",
            r#"{"program":".","input":1}"#,
            "\n",
        );
        let mut out = Vec::new();
        serve_on(requests.as_bytes(), &mut out).unwrap();
        let lines: Vec<&str> = std::str::from_utf8(&out).unwrap().lines().skip(1).collect();
        let failed = |line: &str| -> ProgramError {
            match serde_json::from_str(line).unwrap() {
                Response::Failed(error) => error,
                other => panic!("{other:?}"),
            }
        };
        let broke = failed(lines[0]);
        assert!(
            broke.message.contains("broke the interpreter") || broke.message.contains("cannot"),
            "{broke}"
        );
        let long = failed(lines[1]);
        assert!(
            long.message.len() <= MAX_ERROR_BYTES + 4,
            "{}",
            long.message.len()
        );
        assert!(long.message.ends_with('…'));
        // The worker goes on after both.
        assert_eq!(lines[2], r#"{"outputs":["1"]}"#);
    }
}
