//! The one error type of the harness: what went wrong, and the server logs that say why.

use std::fmt::{self, Write as _};

/// The install hint shown when `redis-server` (or `redis-cli`) cannot be found.
pub(crate) const INSTALL_HINT: &str = "install it with `apt-get install redis-server redis-tools` \
                                       (or run scripts/test, which does)";

/// Why the harness could not start, drive or stop a Redis process.
///
/// The message ([`Display`](fmt::Display)) is written for a CI log: it says what was being done,
/// and when a server was involved it ends with the tail of that server's log, so a failing test
/// shows why without anyone having to log in to the machine.
///
/// Ask what kind of failure it was with the `is_*()` predicates; the kinds may grow.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HarnessError {
    kind: Kind,
    message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    NotInstalled,
    Timeout,
    Exited,
    CommandFailed,
    Cluster,
    Io,
}

impl HarnessError {
    /// `program` is the name or path that could not be run: `redis-server` (or a custom path
    /// standing in for it) or `redis-cli`.
    pub(crate) fn not_installed(program: &str) -> Self {
        let message = match program {
            "redis-server" | "redis-cli" => format!("{program} not found: {INSTALL_HINT}"),
            // A custom binary: keep the standard sentence, then say what was looked for.
            other => format!("redis-server not found: {INSTALL_HINT} [looked for `{other}`]"),
        };
        Self::new(Kind::NotInstalled, message)
    }

    pub(crate) fn timeout(message: impl Into<String>) -> Self {
        Self::new(Kind::Timeout, message)
    }

    pub(crate) fn exited(message: impl Into<String>) -> Self {
        Self::new(Kind::Exited, message)
    }

    pub(crate) fn command_failed(message: impl Into<String>) -> Self {
        Self::new(Kind::CommandFailed, message)
    }

    pub(crate) fn cluster(message: impl Into<String>) -> Self {
        Self::new(Kind::Cluster, message)
    }

    pub(crate) fn io(doing: &str, error: &std::io::Error) -> Self {
        Self::new(Kind::Io, format!("{doing}: {error}"))
    }

    fn new(kind: Kind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    /// Appends a titled section (a log tail, a command's output) to the message.
    pub(crate) fn with_section(mut self, title: &str, body: &str) -> Self {
        let body = body.trim_end();
        // Writing to a `String` cannot fail.
        let _ = if body.is_empty() {
            write!(self.message, "\n--- {title}: (empty) ---")
        } else {
            write!(
                self.message,
                "\n--- {title} ---\n{body}\n--- end of {title} ---"
            )
        };
        self
    }

    /// `redis-server` or `redis-cli` is not installed (not on `PATH`); the message says how to
    /// install it.
    pub fn is_not_installed(&self) -> bool {
        self.kind == Kind::NotInstalled
    }

    /// Something did not happen in time: a server did not answer `PING`, a cluster did not
    /// reach `cluster_state:ok`, or a `redis-cli` command did not return (for example because
    /// the server is paused).
    pub fn is_timeout(&self) -> bool {
        self.kind == Kind::Timeout
    }

    /// A `redis-server` process exited while it was expected to run (a bad config, a port
    /// taken by someone else, a crash).
    pub fn is_exited(&self) -> bool {
        self.kind == Kind::Exited
    }

    /// A `redis-cli` command ran but failed: it could not connect, or the server answered
    /// with an error.
    pub fn is_command_failed(&self) -> bool {
        self.kind == Kind::CommandFailed
    }

    /// Creating or inspecting a Redis Cluster failed (`redis-cli --cluster create`, an
    /// unparsable `CLUSTER NODES`, a master index out of range).
    pub fn is_cluster(&self) -> bool {
        self.kind == Kind::Cluster
    }

    /// An operating-system call failed (temp dir, config file, spawning, signals).
    pub fn is_io(&self) -> bool {
        self.kind == Kind::Io
    }
}

impl fmt::Display for HarnessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for HarnessError {}
