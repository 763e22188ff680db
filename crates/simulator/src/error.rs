//! What can stop a simulation.

use std::fmt;

use tollgate::QuotaError;
use tollgate::config::ConfigErrors;

/// Why a simulation could not run.
#[derive(Debug)]
pub enum Error {
    /// A rule file could not be read.
    Read {
        /// The file.
        path: String,
        /// Why.
        error: std::io::Error,
    },
    /// A rule file has mistakes: each at its line and column, as the gateway reports them.
    Rules(ConfigErrors),
    /// A rule file that Chirp's gateway would refuse (a typed limit's id on a `[[rule]]`).
    Chirp(String),
    /// A built-in quota could not be made (a bug).
    Quota(QuotaError),
    /// The simulation's runtime could not be started.
    Runtime(std::io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Read { path, error } => write!(f, "{path}: {error}"),
            Error::Rules(errors) => write!(f, "{errors}"),
            Error::Chirp(problem) => write!(f, "{problem}"),
            Error::Quota(error) => write!(f, "{error}"),
            Error::Runtime(error) => write!(f, "cannot start the simulation's runtime: {error}"),
        }
    }
}

impl std::error::Error for Error {}
