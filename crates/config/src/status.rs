//! Where the rules in force on one gateway stand: the rule file's version, loads and last
//! mistake, and the fleet document over it.

use std::time::SystemTime;

use crate::error::ConfigErrors;

/// Where a watched rule file stands: the version in force, when it was loaded, and the last
/// mistake, if the newest file was refused; and the fleet document over it, if any
/// ([`RuleOverlay`](crate::RuleOverlay)).
#[derive(Debug, Clone, Default)]
pub struct WatchStatus {
    /// A fingerprint of the file in force (16 hex digits of a hash of its bytes).
    pub version: Option<String>,
    /// When the rules in force were last swapped in (file or fleet document).
    pub loaded_at: Option<SystemTime>,
    /// How many times rules were swapped in (the first load included).
    pub loads: u64,
    /// The mistakes of the newest file, if it was refused (the previous rules stay in force);
    /// `None` once a valid file is loaded.
    pub last_error: Option<ConfigErrors>,
    /// The version of the fleet document in force over the file, if any.
    pub overlay_version: Option<String>,
    /// The mistakes of the newest fleet document, if it was refused (the rules in force stay).
    pub overlay_error: Option<ConfigErrors>,
    /// The ids of the file's rules that the fleet document replaces: edits to them in the file
    /// wait until the document is withdrawn.
    pub overridden: Vec<String>,
}
