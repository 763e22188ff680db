//! The watchdog: an Envoy never outlives the test process that started it.
//!
//! It goes through `sh` (no `libc`, no `unsafe`), and signals only the one process id this
//! harness spawned; nothing is ever looked up or killed by name. (The same watchdog as
//! `tollgate-redis-harness`'s, for Envoy.)

use std::io;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};

/// Kills an Envoy if the process that started it dies without cleaning up.
///
/// `Drop` cannot run when a test binary is killed (a CI timeout, `SIGKILL`, an abort), nor for
/// a static. The watchdog covers those cases with no signal handlers and no `libc`: it is a small `sh` child
/// blocked reading a pipe whose only writer is this process. The kernel closes that pipe when
/// this process exits, however it exits; `read` then returns and the watchdog kills Envoy
/// (by the process id it was given), waits briefly for it to go, and removes its temp dir.
///
/// When the harness stops Envoy itself, it kills the watchdog first (through the watchdog's
/// own `Child`), so a watchdog never outlives its Envoy. On its own, it signals the process id
/// only while that process still runs in Envoy's dir (`/proc/PID/cwd`, where there is a
/// `/proc`), so it never hits a reused id. It ignores `SIGHUP`, `SIGINT` and `SIGTERM`: a Ctrl-C
/// that stops the whole process group must not stop it before it has removed the dir.
#[derive(Debug)]
pub(crate) struct Watchdog {
    child: Child,
    // Held, never written: its closing is the signal.
    _pipe: Option<ChildStdin>,
}

const WATCHDOG_SCRIPT: &str = r#"trap '' HUP INT TERM
read _ignored
real=$(cd "$2" 2>/dev/null && pwd -P)
ours() {
    if [ -d /proc/self ]; then
        [ -n "$real" ] && [ "$(readlink "/proc/$1/cwd" 2>/dev/null)" = "$real" ]
    else
        kill -0 "$1" 2>/dev/null
    fi
}
if ours "$1"; then
    kill -9 "$1" 2>/dev/null
    i=0
    while [ "$i" -lt 100 ] && ours "$1"; do sleep 0.02; i=$((i + 1)); done
fi
rm -rf -- "$2"
"#;

impl Watchdog {
    /// Starts a watchdog for the Envoy process `pid` whose files live in `dir`.
    ///
    /// Std pipes are close-on-exec, so no other child inherits the write end and keeps the
    /// watchdog from noticing this process's exit.
    pub(crate) fn arm(pid: u32, dir: &Path) -> io::Result<Self> {
        let mut child = Command::new("sh")
            .args(["-c", WATCHDOG_SCRIPT, "tollgate-envoy-watchdog"])
            .arg(pid.to_string())
            .arg(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let pipe = child.stdin.take();
        Ok(Self { child, _pipe: pipe })
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        // Kill it before its pipe closes (fields drop after this body), so it does not act.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
