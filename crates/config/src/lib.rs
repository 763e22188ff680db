//! Rules as data: a TOML rule file, validated as a whole, every mistake reported at its line
//! and column. (The facade `tollgate` re-exports this crate as `tollgate::config`, feature `config`.)
//!
//! ```toml
//! [[rule]]
//! id = "posting"
//! match = { method = "POST", path = "/posts" }
//! algorithm = "token_bucket"
//! capacity = 5
//! refill = { amount = 30, per = "1h" }
//! key = "account"                      # an extractor registered in code
//!
//! [[rule]]
//! id = "signups-per-ip-block"
//! match = { method = "POST", path = "/signup" }
//! algorithm = "fixed_window"
//! limit = 20
//! window = "1h"
//! key = { peer_ip = { ipv4_prefix = 24 } }
//! on_store_failure = "closed"
//! ```
//!
//! A rule without `match` applies to every request; with one, to requests whose path matches
//! its axum 0.8 pattern (and, if given, one of its methods). The rest of a rule's fields are
//! those of [`Rule`](tollgate_tower::Rule)'s builder: `cost`, `mode` (`"enforce"`, `"shadow"`), `on_store_failure`
//! (`"open"`, `"local"`, `"closed"`, `{ open_within = { <quota fields> } }`), `on_missing_key`
//! (`"skip"`, `"skip_always"`, `{ refuse = 401 }`), `disclose`, `escalate` (`{ after_refusals,
//! within, block_for }`), and for a cost known only after the response `settle` (`"reported"`,
//! `{ header = "x-tokens-used" }`, `{ function = "<name>" }`), with `cost` as the estimate (a
//! number, `{ header = "x-max-tokens", default = 500 }` or `{ function = "<name>" }`; functions
//! registered with [`Extractors::cost`] and [`Extractors::settle`]), and `alert_at` (`0.8` or
//! `"80%"`: the share of its limit at which a caller raises the rule's alert). Durations are humantime's: `"30s"`, `"15m"`, `"1h 30m"`, `"1d"`.
//! The key kinds are in [`Extractors`]' module docs.
//!
//! [`RuleFile::parse`] reads a whole file and either gives every rule or every mistake (a file
//! with five mistakes reports five); a file that defines no rules is a mistake too, since it
//! would turn limiting off (an editor's truncated file looks just like that). So a bad file
//! never half-replaces good rules: hand the
//! result to [`LayerHandle::replace_rules`](tollgate_tower::LayerHandle::replace_rules) only when
//! it is `Ok`. [`RuleWatcher`] does that for a file on disk, on every change.
//!
//! The guide's chapter *Rule files and live changes* (`docs/guide/src/rule-files.md`) in the
//! repository shows it at work, task by task.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod alert;
mod counting;
mod descriptor;
mod edit;
mod error;
mod fields;
mod file;
mod fleet_modes;
mod key;
mod limit;
mod overrides;
mod per_message;
mod quota;
mod rule;
mod set;
mod settle;
mod sources;
mod status;
mod watch;
mod write;

pub use self::descriptor::{
    DescriptorMatch, DescriptorRule, EntryMatch, MAX_DESCRIPTOR_ENTRIES, ValueMatch,
};
pub use self::edit::{POLICY_FIELDS, is_patchable, parse_rule, patch_rule};
pub use self::error::{ConfigError, ConfigErrors};
pub use self::file::RuleFile;
pub use self::key::Extractors;
pub use self::quota::{ALGORITHMS, QUOTA_FIELDS};
pub use self::sources::RuleOverlay;
pub use self::status::WatchStatus;
pub use self::watch::{RuleWatcher, WatchError};
pub use self::write::rules_to_toml;
