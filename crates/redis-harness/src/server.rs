//! One real `redis-server` process on a free loopback port, in its own temp dir.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::HarnessError;
use crate::cli::{self, redis_cli};
use crate::port::free_port;
use crate::process::{self, Watchdog};

/// The `redis-server` program, looked up on `PATH`.
const REDIS_SERVER: &str = "redis-server";

/// How long a server gets to answer `PING` after it is spawned.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// How often a starting server is pinged.
const START_POLL: Duration = Duration::from_millis(25);

/// How long one readiness `PING` may take.
const PING_TIMEOUT: Duration = Duration::from_secs(1);

/// How many free ports are tried when another process takes the chosen one first.
const PORT_ATTEMPTS: usize = 5;

/// How many log lines an error message shows.
const LOG_TAIL_LINES: usize = 40;

const CONFIG_FILE: &str = "redis.conf";
const LOG_FILE: &str = "redis.log";
/// What the server writes before it opens its log file (a config error, for instance).
const STDERR_FILE: &str = "redis.stderr";

/// A `redis-server` process that this harness started and will stop.
///
/// [`start`](Self::start) picks a free port on 127.0.0.1, writes a config into a fresh temp
/// dir (loopback only, no persistence, log in the dir, no protected mode, replicas synced
/// without delay), spawns `redis-server` and waits until `redis-cli -p PORT ping` answers
/// `PONG`. Dropping the value kills the process (`SIGKILL`), reaps it and removes the temp dir.
///
/// The failure-injection methods — [`kill`](Self::kill), [`pause`](Self::pause),
/// [`resume`](Self::resume), [`restart`](Self::restart) — take `&self`, so a test can drive a
/// node it only borrows (from [`RedisCluster::nodes`](crate::RedisCluster::nodes), say). They
/// only ever signal the process this value spawned, by its process id.
///
/// If the test process dies before `Drop` runs, a watchdog (a tiny `sh` child) kills the
/// server and removes its dir; see the crate docs.
///
/// ```no_run
/// use tollgate_redis_harness::RedisServer;
///
/// let server = RedisServer::start()?;
/// server.cli(&["set", "greeting", "hello"])?;
/// assert_eq!(server.cli(&["get", "greeting"])?.trim(), "hello");
///
/// server.kill()?;
/// assert!(server.cli(&["ping"]).is_err());
/// server.restart()?; // same port, same dir, empty data set (nothing is persisted)
/// assert_eq!(server.cli(&["ping"])?.trim(), "PONG");
/// # Ok::<(), tollgate_redis_harness::HarnessError>(())
/// ```
#[derive(Debug)]
pub struct RedisServer {
    binary: String,
    port: u16,
    config: PathBuf,
    state: Mutex<State>,
    // Declared last: dropped after the process is gone.
    dir: TempDir,
}

/// What kind of server a config describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Standalone,
    /// A Redis Cluster node whose failure is noticed after `node_timeout`.
    ClusterNode {
        node_timeout: Duration,
    },
}

#[derive(Debug)]
struct State {
    running: Option<Running>,
    paused: bool,
}

/// A live `redis-server` child and its watchdog; dropping it stops both.
#[derive(Debug)]
struct Running {
    // Dropped (killed) in `Drop::drop` before the child, so it never outlives it.
    watchdog: Option<Watchdog>,
    child: Child,
}

impl Drop for Running {
    fn drop(&mut self) {
        drop(self.watchdog.take());
        // SIGKILL also ends a stopped (paused) process.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl RedisServer {
    /// Starts `redis-server` from `PATH` on a free loopback port and waits until it answers
    /// `PING`.
    ///
    /// # Errors
    ///
    /// * [`is_not_installed`](HarnessError::is_not_installed) — `redis-server` or `redis-cli`
    ///   is not on `PATH`; the message says how to install them;
    /// * [`is_timeout`](HarnessError::is_timeout) — no `PONG` within 10 seconds;
    /// * [`is_exited`](HarnessError::is_exited) — the server exited during start-up;
    /// * [`is_io`](HarnessError::is_io) — the temp dir or config could not be written.
    ///
    /// Every error about a spawned server ends with the tail of its log.
    pub fn start() -> Result<Self, HarnessError> {
        Self::start_with(REDIS_SERVER)
    }

    /// Like [`start`](Self::start), with another `redis-server` binary: a name looked up on
    /// `PATH`, or a path (a specific Redis version, say).
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start); a `binary` that does not exist gives an
    /// [`is_not_installed`](HarnessError::is_not_installed) error with the install hint.
    pub fn start_with(binary: &str) -> Result<Self, HarnessError> {
        Self::launch(binary, Mode::Standalone)
    }

    pub(crate) fn launch(binary: &str, mode: Mode) -> Result<Self, HarnessError> {
        let dir = tempfile::Builder::new()
            .prefix("tollgate-redis-")
            .tempdir()
            .map_err(|error| HarnessError::io("could not create a temp dir", &error))?;
        let config = dir.path().join(CONFIG_FILE);
        let mut last_error = None;
        for _ in 0..PORT_ATTEMPTS {
            let port = free_port(matches!(mode, Mode::ClusterNode { .. }))?;
            for stale in [LOG_FILE, STDERR_FILE] {
                // A previous attempt's "Address already in use" must not be read again.
                let _ = fs::remove_file(dir.path().join(stale));
            }
            write_config(&config, dir.path(), port, mode)?;
            match spawn_ready(binary, &config, dir.path(), port) {
                Ok(running) => {
                    return Ok(Self {
                        binary: binary.to_owned(),
                        port,
                        config,
                        state: Mutex::new(State {
                            running: Some(running),
                            paused: false,
                        }),
                        dir,
                    });
                }
                Err(error) if error.is_exited() && lost_port_race(dir.path()) => {
                    last_error = Some(error);
                }
                Err(error) => return Err(error),
            }
        }
        Err(last_error.unwrap_or_else(|| HarnessError::exited("redis-server did not start")))
    }

    /// The port the server listens on (on 127.0.0.1); it stays the same across
    /// [`restart`](Self::restart).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's URL, `redis://127.0.0.1:PORT/`, for a Redis client.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The process id of the running server, or `None` after [`kill`](Self::kill) (it changes
    /// on [`restart`](Self::restart)).
    pub fn pid(&self) -> Option<u32> {
        self.state()
            .running
            .as_ref()
            .map(|running| running.child.id())
    }

    /// Whether the process this value started is alive (a paused one is; one that was killed
    /// or crashed is not).
    pub fn is_running(&self) -> bool {
        let mut state = self.state();
        match state.running.as_mut() {
            Some(running) => matches!(running.child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Whether the server is stopped with [`pause`](Self::pause) (and not resumed since).
    pub fn is_paused(&self) -> bool {
        self.state().paused
    }

    /// The server's temp dir: config, log, and whatever the server writes (`nodes.conf`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The server's log so far (all starts, including restarts); empty if there is none yet.
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join(LOG_FILE)).unwrap_or_default()
    }

    /// Runs `redis-cli` against this server with [`DEFAULT_CLI_TIMEOUT`](crate::DEFAULT_CLI_TIMEOUT)
    /// and returns its output; see [`redis_cli`](crate::redis_cli).
    ///
    /// # Errors
    ///
    /// As [`redis_cli`](crate::redis_cli): a timeout, a failed command (no server, an error
    /// reply), or `redis-cli` not installed.
    pub fn cli(&self, args: &[&str]) -> Result<String, HarnessError> {
        redis_cli(self.port, args, cli::DEFAULT_CLI_TIMEOUT)
    }

    /// Like [`cli`](Self::cli), giving up after `timeout` (the way to see that a paused server
    /// does not answer).
    ///
    /// # Errors
    ///
    /// As [`redis_cli`](crate::redis_cli).
    pub fn cli_with_timeout(
        &self,
        args: &[&str],
        timeout: Duration,
    ) -> Result<String, HarnessError> {
        redis_cli(self.port, args, timeout)
    }

    /// Kills the server (`SIGKILL`, no shutdown, nothing saved) and waits for it to exit.
    ///
    /// The port stops answering at once. Does nothing if the server is not running.
    ///
    /// # Errors
    ///
    /// None today; the `Result` leaves room for platforms where killing can fail.
    pub fn kill(&self) -> Result<(), HarnessError> {
        let mut state = self.state();
        state.paused = false;
        drop(state.running.take());
        Ok(())
    }

    /// Stops the server with `SIGSTOP`: it keeps its port and accepts connections, but answers
    /// nothing until [`resume`](Self::resume) — a hung server, as a client sees it.
    ///
    /// # Errors
    ///
    /// [`is_exited`](HarnessError::is_exited) if the server is not running;
    /// [`is_io`](HarnessError::is_io) if the signal could not be sent.
    pub fn pause(&self) -> Result<(), HarnessError> {
        self.send("STOP", true)
    }

    /// Continues a [`pause`](Self::pause)d server with `SIGCONT`; it answers the commands that
    /// waited meanwhile.
    ///
    /// # Errors
    ///
    /// As [`pause`](Self::pause).
    pub fn resume(&self) -> Result<(), HarnessError> {
        self.send("CONT", false)
    }

    fn send(&self, signal: &str, paused_after: bool) -> Result<(), HarnessError> {
        let mut state = self.state();
        let alive = match state.running.as_mut() {
            Some(running) => {
                matches!(running.child.try_wait(), Ok(None)).then(|| running.child.id())
            }
            None => None,
        };
        let Some(pid) = alive else {
            return Err(HarnessError::exited(format!(
                "cannot send SIG{signal} to redis-server on port {}: it is not running",
                self.port
            )));
        };
        process::signal(pid, signal)?;
        state.paused = paused_after;
        Ok(())
    }

    /// Starts the server again on the same port, with the same config and dir, and waits until
    /// it answers `PING`. A running server is killed first.
    ///
    /// Nothing is persisted, so a restarted standalone server is empty; a cluster node reads its
    /// `nodes.conf` back and rejoins its cluster.
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start); in particular [`is_exited`](HarnessError::is_exited) if
    /// another process took the port meanwhile (the log says so).
    pub fn restart(&self) -> Result<(), HarnessError> {
        let mut state = self.state();
        state.paused = false;
        drop(state.running.take());
        state.running = Some(spawn_ready(
            &self.binary,
            &self.config,
            self.dir.path(),
            self.port,
        )?);
        Ok(())
    }

    /// The last lines of the log (and of anything printed before the log opened), for error
    /// messages.
    pub(crate) fn log_tail(&self, lines: usize) -> String {
        log_tail(self.dir.path(), lines)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A test that panicked while holding the lock leaves consistent state behind.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Writes the server's config. Values are quoted: a temp dir path may hold spaces.
///
/// `repl-diskless-sync-delay 0`: a master otherwise waits 5 s for more replicas before its first
/// full sync, which would add 5 s to every cluster start and every rejoin after a failover.
fn write_config(path: &Path, dir: &Path, port: u16, mode: Mode) -> Result<(), HarnessError> {
    let mut config = format!(
        "port {port}\n\
         bind 127.0.0.1\n\
         dir {dir}\n\
         save \"\"\n\
         appendonly no\n\
         logfile {log}\n\
         daemonize no\n\
         protected-mode no\n\
         repl-diskless-sync-delay 0\n",
        dir = quote(dir),
        log = quote(&dir.join(LOG_FILE)),
    );
    if let Mode::ClusterNode { node_timeout } = mode {
        config.push_str(&format!(
            "cluster-enabled yes\n\
             cluster-config-file nodes.conf\n\
             cluster-node-timeout {}\n\
             cluster-require-full-coverage no\n",
            node_timeout.as_millis()
        ));
    }
    fs::write(path, config)
        .map_err(|error| HarnessError::io(&format!("could not write {}", path.display()), &error))
}

/// A config-file string: double-quoted, with `\` and `"` escaped.
fn quote(path: &Path) -> String {
    let text = path.to_string_lossy();
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Spawns `binary CONFIG` in `dir` and waits until it answers `PING` on `port`.
///
/// On any failure the child is killed (dropping [`Running`]) and the error carries the log tail.
fn spawn_ready(
    binary: &str,
    config: &Path,
    dir: &Path,
    port: u16,
) -> Result<Running, HarnessError> {
    let stderr = File::options()
        .create(true)
        .append(true)
        .open(dir.join(STDERR_FILE))
        .map_err(|error| HarnessError::io("could not open the server's stderr file", &error))?;
    let stdout = stderr
        .try_clone()
        .map_err(|error| HarnessError::io("could not open the server's stderr file", &error))?;
    let child = Command::new(binary)
        .arg(config)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .map_err(|error| cli::spawn_error(binary, &error))?;
    // Without `sh` there is no watchdog; `Drop` still stops the server.
    let watchdog = Watchdog::arm(child.id(), dir).ok();
    let mut running = Running { watchdog, child };
    wait_ready(&mut running.child, dir, port)?;
    Ok(running)
}

/// Waits until the server answers `PING` — and is the one that answers: a server that lost the
/// port race may not have exited yet while another process's Redis answers on that port, so the
/// `PONG` only counts once `INFO server` names our child's process id.
fn wait_ready(child: &mut Child, dir: &Path, port: u16) -> Result<(), HarnessError> {
    let deadline = Instant::now() + START_TIMEOUT;
    let ours = format!("process_id:{}", child.id());
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(with_logs(
                HarnessError::exited(format!(
                    "redis-server on port {port} exited ({status}) before answering PING"
                )),
                dir,
                port,
            ));
        }
        let last_answer = match redis_cli(port, &["ping"], PING_TIMEOUT) {
            Ok(answer) if answer.trim() == "PONG" => {
                match redis_cli(port, &["info", "server"], PING_TIMEOUT) {
                    Ok(info) if info.lines().any(|line| line.trim() == ours) => return Ok(()),
                    Ok(_) => format!("PONG from another process than ours ({ours})"),
                    Err(error) => error.to_string(),
                }
            }
            Ok(answer) => answer,
            Err(error) if error.is_not_installed() => return Err(error),
            Err(error) => error.to_string(),
        };
        if Instant::now() >= deadline {
            return Err(with_logs(
                HarnessError::timeout(format!(
                    "redis-server on port {port} did not answer PING within {START_TIMEOUT:?}; \
                     last answer: {}",
                    last_answer.trim()
                )),
                dir,
                port,
            ));
        }
        thread::sleep(START_POLL);
    }
}

/// Whether the server exited because another process took its port (or cluster bus port)
/// between our probe and its bind.
fn lost_port_race(dir: &Path) -> bool {
    log_tail(dir, LOG_TAIL_LINES).contains("Address already in use")
}

fn with_logs(error: HarnessError, dir: &Path, port: u16) -> HarnessError {
    error.with_section(
        &format!("redis-server log, 127.0.0.1:{port}, last lines"),
        &log_tail(dir, LOG_TAIL_LINES),
    )
}

/// The last `lines` lines of the server's stderr and log files.
fn log_tail(dir: &Path, lines: usize) -> String {
    let mut tail = String::new();
    for file in [STDERR_FILE, LOG_FILE] {
        let text = fs::read_to_string(dir.join(file)).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        let start = all.len().saturating_sub(lines);
        for line in &all[start..] {
            tail.push_str(line);
            tail.push('\n');
        }
    }
    tail
}
