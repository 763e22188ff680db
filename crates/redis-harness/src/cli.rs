//! Running `redis-cli` (and any short command) with a deadline.
//!
//! A paused server accepts TCP connections (the kernel does that) but never answers, and
//! `redis-cli` has no read timeout, so every command the harness runs is bounded by a std-side
//! deadline: past it, the command is killed through its own `Child` handle.

use std::ffi::OsStr;
use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::HarnessError;

/// How long [`redis_cli`] callers in this crate wait for a command by default.
///
/// Long enough for a busy CI machine, short enough that a hung server fails a test quickly.
pub const DEFAULT_CLI_TIMEOUT: Duration = Duration::from_secs(5);

/// The `redis-cli` program, looked up on `PATH`.
pub(crate) const REDIS_CLI: &str = "redis-cli";

/// How often a running command is polled for completion.
const POLL: Duration = Duration::from_millis(5);

/// Runs `redis-cli -h 127.0.0.1 -p PORT -e ARGS...` and returns its standard output.
///
/// The output is `redis-cli`'s raw format (the default when not writing to a terminal): `PONG`,
/// `OK`, a bulk string's bytes, one array element per line. `-e` makes an error reply a failure.
///
/// # Errors
///
/// * [`is_timeout`](HarnessError::is_timeout) — no answer within `timeout` (the `redis-cli`
///   process is then killed), e.g. the server is paused;
/// * [`is_command_failed`](HarnessError::is_command_failed) — nothing listens on the port, or
///   the server answered with an error; the message holds `redis-cli`'s output;
/// * [`is_not_installed`](HarnessError::is_not_installed) — `redis-cli` is not on `PATH`.
///
/// # Example
///
/// ```no_run
/// use std::time::Duration;
/// use tollgate_redis_harness::{redis_cli, RedisServer};
///
/// let server = RedisServer::start()?;
/// assert_eq!(redis_cli(server.port(), &["ping"], Duration::from_secs(1))?.trim(), "PONG");
/// # Ok::<(), tollgate_redis_harness::HarnessError>(())
/// ```
pub fn redis_cli(port: u16, args: &[&str], timeout: Duration) -> Result<String, HarnessError> {
    let port_arg = port.to_string();
    let mut full: Vec<&str> = vec!["-h", "127.0.0.1", "-p", &port_arg, "-e"];
    full.extend_from_slice(args);
    let output = run(REDIS_CLI, &full, timeout)?;
    if output.status.success() {
        Ok(output.stdout)
    } else {
        Err(HarnessError::command_failed(format!(
            "`redis-cli -p {port} {}` failed ({}): {}{}",
            args.join(" "),
            output.status,
            output.stderr.trim(),
            output.stdout.trim()
        )))
    }
}

/// What a finished command left behind.
#[derive(Debug)]
pub(crate) struct Output {
    pub(crate) status: ExitStatus,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// Runs `program ARGS...` to completion, or kills it once `timeout` has passed.
///
/// Standard output and error are drained on their own threads so that a chatty command cannot
/// fill a pipe and stall.
pub(crate) fn run<S: AsRef<OsStr>>(
    program: &str,
    args: &[S],
    timeout: Duration,
) -> Result<Output, HarnessError> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| spawn_error(program, &error))?;
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let status = wait_with_deadline(&mut child, timeout);
    let collect = |reader: thread::JoinHandle<String>| reader.join().unwrap_or_default();
    let (stdout, stderr) = (collect(stdout), collect(stderr));
    let Some(status) = status else {
        let command: Vec<_> = args.iter().map(|a| a.as_ref().to_string_lossy()).collect();
        return Err(HarnessError::timeout(format!(
            "`{program} {}` did not finish within {timeout:?} (killed it)",
            command.join(" ")
        )));
    };
    Ok(Output {
        status,
        stdout,
        stderr,
    })
}

/// The error for a command that could not be started.
pub(crate) fn spawn_error(program: &str, error: &std::io::Error) -> HarnessError {
    if error.kind() == std::io::ErrorKind::NotFound {
        HarnessError::not_installed(program)
    } else {
        HarnessError::io(&format!("could not run `{program}`"), error)
    }
}

/// Waits for `child` until `timeout`; past it, kills and reaps it and returns `None`.
fn wait_with_deadline(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => thread::sleep(POLL),
            // Out of time, or the status cannot be read: either way, stop it.
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

fn drain(pipe: Option<impl Read + Send + 'static>) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    })
}
