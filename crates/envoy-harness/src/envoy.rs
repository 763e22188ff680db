//! One real Envoy process on free loopback ports, in its own temp dir.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::HarnessError;
use crate::admin;
use crate::binary::envoy_binary;
use crate::config::{EnvoyConfig, Ports};
use crate::process::Watchdog;

/// How long Envoy gets to become ready (or to validate a config). Envoy takes a fraction of a
/// second; the rest is for a loaded CI machine.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// How often a starting Envoy is looked at.
const START_POLL: Duration = Duration::from_millis(20);

/// The listener's name in [`EnvoyConfig`]'s YAML, as `/listeners` reports it.
const LISTENER_NAME: &str = "ingress";

const CONFIG_FILE: &str = "envoy.yaml";
/// Where Envoy writes its admin's address once it listens (`--admin-address-path`).
const ADMIN_ADDRESS_FILE: &str = "admin-address";
/// Envoy's standard output and error: its log.
const LOG_FILE: &str = "envoy.log";

/// How many lines of Envoy's log an error message shows.
const LOG_TAIL_LINES: usize = 60;

/// An Envoy process that this harness started and will stop.
///
/// [`start`](Self::start) writes the config into a fresh temp dir, with the listener and the
/// admin on port 0 of 127.0.0.1, so the kernel picks free ports as Envoy binds them (no window
/// in which another process can take a port picked beforehand); then it runs
///
/// ```text
/// $ENVOY -c envoy.yaml --disable-hot-restart --concurrency 1 --log-level warn \
///        --admin-address-path admin-address
/// ```
///
/// (`warn`, or the config's [`log_level`](EnvoyConfig::log_level)) and waits until the admin's
/// `/ready` answers `LIVE`, reading the ports back from the admin
/// (`/listeners`). `--disable-hot-restart` leaves out the shared memory and domain socket that
/// hot restart keys by `--base-id`, so any number of Envoys run at once, in one test binary or
/// several.
///
/// Dropping the value (or [`stop`](Self::stop)) kills the process (`SIGKILL`, by the process id
/// the harness spawned — never by name), reaps it and removes the temp dir. If the test process
/// dies before that, a watchdog (a small `sh` child) kills Envoy and removes the dir.
///
/// ```no_run
/// use tollgate_envoy_harness::{Envoy, EnvoyConfig, RateLimitFilter};
///
/// let upstream = "127.0.0.1:3000".parse().unwrap(); // the test's server
/// let service = "127.0.0.1:8081".parse().unwrap(); // the rate limit service
/// let envoy = Envoy::start(
///     &EnvoyConfig::new(upstream).rate_limit_filter(RateLimitFilter::new("tollgate", service)),
/// )?;
/// let url = envoy.url(); // "http://127.0.0.1:PORT", the listener, for the test's client
/// // ... requests through Envoy ...
/// assert_eq!(envoy.counter("cluster.upstream.ratelimit.error")?, 0);
/// # let _ = url;
/// # Ok::<(), tollgate_envoy_harness::HarnessError>(())
/// ```
#[derive(Debug)]
pub struct Envoy {
    listener: SocketAddr,
    admin: SocketAddr,
    running: Mutex<Option<Running>>,
    // Declared last: dropped after the process is gone.
    dir: TempDir,
}

/// A live Envoy child and its watchdog; dropping it stops both.
#[derive(Debug)]
struct Running {
    // Dropped (killed) in `Drop::drop` before the child, so it never outlives it.
    watchdog: Option<Watchdog>,
    child: Child,
}

impl Drop for Running {
    fn drop(&mut self) {
        drop(self.watchdog.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Envoy {
    /// Starts Envoy ([`envoy_binary`](crate::envoy_binary): `ENVOY`, else the one
    /// `scripts/test` installs, else `envoy` on `PATH`) with `config`, and waits until it is
    /// ready.
    ///
    /// # Errors
    ///
    /// * [`is_not_installed`](HarnessError::is_not_installed) — no Envoy binary; the message
    ///   says how to install one;
    /// * [`is_exited`](HarnessError::is_exited) — Envoy exited during start-up, most often
    ///   refusing the config: the message holds its log and the config;
    /// * [`is_timeout`](HarnessError::is_timeout) — not `LIVE` within 30 seconds;
    /// * [`is_admin`](HarnessError::is_admin) — the admin did not name the listener's address;
    /// * [`is_io`](HarnessError::is_io) — the temp dir or config could not be written, or
    ///   Envoy could not be spawned.
    pub fn start(config: &EnvoyConfig) -> Result<Self, HarnessError> {
        Self::start_with(&envoy_binary()?, config)
    }

    /// Like [`start`](Self::start), with the Envoy binary at `binary`.
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start).
    pub fn start_with(binary: &Path, config: &EnvoyConfig) -> Result<Self, HarnessError> {
        let dir = tempfile::Builder::new()
            .prefix("tollgate-envoy-")
            .tempdir()
            .map_err(|error| HarnessError::io("could not create a temp dir", &error))?;
        let yaml = config.render(Ports {
            listener: 0,
            admin: 0,
        });
        let config_path = write(dir.path(), CONFIG_FILE, &yaml)?;
        let mut command = Command::new(binary);
        command
            .arg("-c")
            .arg(&config_path)
            .args(["--disable-hot-restart", "--concurrency", "1"])
            .args(["--log-level", config.level()])
            .args(["--admin-address-path", ADMIN_ADDRESS_FILE]);
        let child = spawn(command, binary, dir.path())?;
        // Without `sh` there is no watchdog; `Drop` still stops Envoy.
        let watchdog = Watchdog::arm(child.id(), dir.path()).ok();
        let mut running = Running { watchdog, child };
        let (admin, listener) = wait_ready(&mut running.child, dir.path())
            .map_err(|error| error.with_section("the config Envoy was given", &yaml))?;
        Ok(Self {
            listener,
            admin,
            running: Mutex::new(Some(running)),
            dir,
        })
    }

    /// Checks `config` ([`EnvoyConfig::to_yaml`]'s rendering) with `$ENVOY --mode validate`:
    /// every field against Envoy's API, without binding a port or starting anything.
    ///
    /// # Errors
    ///
    /// [`is_rejected`](HarnessError::is_rejected) with Envoy's reason when it refuses the
    /// config; otherwise as [`start`](Self::start).
    pub fn validate(config: &EnvoyConfig) -> Result<(), HarnessError> {
        let binary = envoy_binary()?;
        let dir = tempfile::Builder::new()
            .prefix("tollgate-envoy-validate-")
            .tempdir()
            .map_err(|error| HarnessError::io("could not create a temp dir", &error))?;
        let yaml = config.to_yaml();
        let config_path = write(dir.path(), CONFIG_FILE, &yaml)?;
        let mut command = Command::new(&binary);
        command
            .args(["--mode", "validate", "-c"])
            .arg(&config_path)
            .args(["--disable-hot-restart", "--log-level", "warn"]);
        let mut child = spawn(command, &binary, dir.path())?;
        let status = wait_exit(&mut child)?;
        if status.success() {
            return Ok(());
        }
        Err(HarnessError::rejected(format!(
            "`envoy --mode validate` refused the config ({status})"
        ))
        .with_section("Envoy's log", &log_tail(dir.path()))
        .with_section("the config", &yaml))
    }

    /// The listener's address, 127.0.0.1 and the port the kernel gave it.
    pub fn listener_addr(&self) -> SocketAddr {
        self.listener
    }

    /// The listener as a URL, `http://127.0.0.1:PORT`, to append a path to.
    pub fn url(&self) -> String {
        format!("http://{}", self.listener)
    }

    /// The admin interface's address, 127.0.0.1 and the port the kernel gave it.
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin
    }

    /// Every counter and gauge of the admin's `/stats`, by name (histograms left out). Envoy
    /// creates most counters when first counted: a name not there yet stands for 0.
    ///
    /// # Errors
    ///
    /// [`is_admin`](HarnessError::is_admin) or [`is_timeout`](HarnessError::is_timeout) when
    /// the admin does not answer (after [`stop`](Self::stop), say).
    pub fn stats(&self) -> Result<BTreeMap<String, u64>, HarnessError> {
        let page = admin::get(self.admin, "/stats")?;
        if page.status != 200 {
            return Err(HarnessError::admin(format!(
                "GET http://{}/stats answered {}: {}",
                self.admin, page.status, page.body
            )));
        }
        Ok(admin::parse_stats(&page.body))
    }

    /// One counter (or gauge) of [`stats`](Self::stats): 0 when Envoy has not created it,
    /// which it does when first counted (`cluster.upstream.ratelimit.error`, say).
    ///
    /// # Errors
    ///
    /// As [`stats`](Self::stats).
    pub fn counter(&self, name: &str) -> Result<u64, HarnessError> {
        Ok(self.stats()?.get(name).copied().unwrap_or(0))
    }

    /// The process id of the running Envoy, or `None` after [`stop`](Self::stop).
    pub fn pid(&self) -> Option<u32> {
        self.running().as_ref().map(|running| running.child.id())
    }

    /// Whether the process this value started is alive.
    pub fn is_running(&self) -> bool {
        match self.running().as_mut() {
            Some(running) => matches!(running.child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// What Envoy has logged so far (standard output and error, at the config's
    /// [`log_level`](EnvoyConfig::log_level): `warn` and above unless it says otherwise).
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join(LOG_FILE)).unwrap_or_default()
    }

    /// The config file Envoy runs (ports 0: the kernel's pick, see
    /// [`listener_addr`](Self::listener_addr)).
    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join(CONFIG_FILE)
    }

    /// Kills Envoy (`SIGKILL`, by its process id) and waits for it to exit: its ports stop
    /// answering at once. Does nothing if it is not running. The temp dir stays until drop.
    pub fn stop(&self) {
        drop(self.running().take());
    }

    fn running(&self) -> MutexGuard<'_, Option<Running>> {
        // A test that panicked while holding the lock leaves consistent state behind.
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn write(dir: &Path, name: &str, text: &str) -> Result<PathBuf, HarnessError> {
    let path = dir.join(name);
    fs::write(&path, text).map_err(|error| {
        HarnessError::io(&format!("could not write {}", path.display()), &error)
    })?;
    Ok(path)
}

/// Spawns `command` in `dir`, its output to the log file there.
fn spawn(mut command: Command, binary: &Path, dir: &Path) -> Result<Child, HarnessError> {
    let log = File::create(dir.join(LOG_FILE))
        .map_err(|error| HarnessError::io("could not create Envoy's log file", &error))?;
    let log_too = log
        .try_clone()
        .map_err(|error| HarnessError::io("could not create Envoy's log file", &error))?;
    command
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_too)
        .spawn()
        .map_err(|error| {
            if error.kind() == std::io::ErrorKind::NotFound {
                HarnessError::not_installed(&format!("{} does not exist", binary.display()))
            } else {
                HarnessError::io(&format!("could not run {}", binary.display()), &error)
            }
        })
}

/// Waits until the admin's `/ready` answers `LIVE`; returns the admin's and the listener's
/// addresses. On failure the child is left to the caller, which drops (kills) it.
fn wait_ready(child: &mut Child, dir: &Path) -> Result<(SocketAddr, SocketAddr), HarnessError> {
    let deadline = Instant::now() + START_TIMEOUT;
    let mut last_seen = "no admin address yet".to_owned();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(HarnessError::exited(format!(
                "envoy exited ({status}) before its admin answered LIVE"
            ))
            .with_section("Envoy's log", &log_tail(dir)));
        }
        if let Some(admin) = admin_address(dir) {
            match admin::get(admin, "/ready") {
                Ok(page) if page.status == 200 && page.body.trim() == "LIVE" => {
                    let listener = listener(admin)?;
                    return Ok((admin, listener));
                }
                Ok(page) => last_seen = format!("/ready answered {}: {}", page.status, page.body),
                Err(error) => last_seen = error.to_string(),
            }
        }
        if Instant::now() >= deadline {
            return Err(HarnessError::timeout(format!(
                "envoy was not LIVE within {START_TIMEOUT:?}; last seen: {}",
                last_seen.trim()
            ))
            .with_section("Envoy's log", &log_tail(dir)));
        }
        thread::sleep(START_POLL);
    }
}

/// The admin's address, once Envoy has written it (whole: it ends with a newline or parses).
fn admin_address(dir: &Path) -> Option<SocketAddr> {
    fs::read_to_string(dir.join(ADMIN_ADDRESS_FILE))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The listener's address, from the admin's `/listeners`.
fn listener(admin: SocketAddr) -> Result<SocketAddr, HarnessError> {
    let page = admin::get(admin, "/listeners")?;
    admin::listener_address(&page.body, LISTENER_NAME).ok_or_else(|| {
        HarnessError::admin(format!(
            "the admin's /listeners names no `{LISTENER_NAME}` listener: {}",
            page.body.trim()
        ))
    })
}

/// Waits for a command to exit; past the deadline, kills it.
fn wait_exit(child: &mut Child) -> Result<ExitStatus, HarnessError> {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) if Instant::now() < deadline => thread::sleep(START_POLL),
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(HarnessError::timeout(format!(
                    "envoy did not finish within {START_TIMEOUT:?} (killed it)"
                )));
            }
        }
    }
}

/// The last lines of Envoy's log, for error messages.
fn log_tail(dir: &Path) -> String {
    let text = fs::read_to_string(dir.join(LOG_FILE)).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
}
