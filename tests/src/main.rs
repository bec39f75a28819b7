//! The real `hookline` binary, built inside the test package so the
//! crash-recovery tests can start, SIGKILL and restart it as a process.

fn main() -> anyhow::Result<()> {
    hookline::main()
}
