//! A ratelimit configuration as read from its YAML: the domain and the tree of descriptors,
//! each part with where it was written. Reading reports every problem and keeps going, so a
//! part read with a problem holds a stand-in (an empty key, no quota); nothing is written then.

use super::error::At;
use super::unit::Unit;

/// The file: one domain and its descriptors.
pub(crate) struct Config {
    /// Where the file's mapping starts.
    pub(crate) at: At,
    pub(crate) domain: String,
    pub(crate) descriptors: Vec<Descriptor>,
}

/// One entry of a `descriptors` list, and those nested under it.
pub(crate) struct Descriptor {
    /// Where its mapping starts.
    pub(crate) at: At,
    pub(crate) key: String,
    /// `None`: any value (ratelimit takes an empty value the same way). A trailing `*` makes
    /// the rest a prefix.
    pub(crate) value: Option<String>,
    pub(crate) limit: Option<Limit>,
    pub(crate) shadow: bool,
    /// What was accepted and dropped (statistics-only settings), one sentence each.
    pub(crate) dropped: Vec<String>,
    pub(crate) descriptors: Vec<Descriptor>,
}

/// A descriptor's `rate_limit`.
pub(crate) struct Limit {
    /// `None` when it could not be read (reported).
    pub(crate) quota: Option<Quota>,
    /// Its `name`, which `replaces` entries refer to.
    pub(crate) name: Option<String>,
    pub(crate) replaces: Vec<Replaced>,
}

/// How much a rate_limit allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Quota {
    /// `requests_per_unit` per `unit`, counted in fixed windows.
    Counted { limit: u64, unit: Unit },
    /// `unlimited: true`: never limited.
    Unlimited,
}

/// One `replaces` entry: the `name` of a rate_limit this one replaces.
pub(crate) struct Replaced {
    pub(crate) at: At,
    pub(crate) name: String,
}
