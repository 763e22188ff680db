//! From envoyproxy/ratelimit's YAML configuration to a tollgate rule file.
//!
//! [`migrate`] reads one ratelimit configuration file (one YAML document: a `domain` and its
//! tree of `descriptors`) and writes the TOML rule file that limits the same Envoy
//! descriptors, or lists every problem that keeps it from doing so, each at its line and
//! column with what to do.
//!
//! ```
//! use tollgate_envoy::migrate::migrate;
//!
//! let yaml = "\
//! domain: edge
//! descriptors:
//!   - key: remote_address
//!     rate_limit:
//!       unit: minute
//!       requests_per_unit: 20
//! ";
//! let rules = migrate("config.yaml", yaml)?;
//! assert!(rules.ends_with(
//!     r#"
//! [[rule]]
//! id = "edge.remote_address"
//! envoy = { domain = "edge", descriptor = [{ key = "remote_address" }] }
//! algorithm = "fixed_window"
//! limit = 20
//! window = "1m"
//! "#
//! ));
//!
//! let errors = migrate("config.yaml", "domain: edge\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute}\n").unwrap_err();
//! assert_eq!(
//!     errors.to_string(),
//!     "config.yaml:4:17: this rate_limit has no `requests_per_unit`: ratelimit takes that as 0, \
//!      which refuses every request, and a tollgate limit is at least 1; add \
//!      `requests_per_unit: <n>` (or `unlimited: true`)"
//! );
//! # Ok::<(), tollgate_envoy::migrate::MigrationErrors>(())
//! ```
//!
//! # What becomes what
//!
//! Each descriptor that has a `rate_limit` becomes one rule, whose `envoy.descriptor` is the
//! path of (`key`, `value`) entries from the top of the file to it: Envoy's descriptor of n
//! entries matches a rule at depth n. Descriptors without a `rate_limit` only lend their entry
//! to the paths below them. Rules are written depth first, in file order, so the same YAML
//! always gives the same text.
//!
//! * `requests_per_unit` per `unit` is a `fixed_window` rule (ratelimit's counters are fixed
//!   windows): `limit`, and `window` `1s`, `1m`, `1h`, `1d`, `7d`, `30d` or `365d` (ratelimit
//!   counts a month as 30 days and a year as 365).
//! * `unlimited: true` is a rule with only `id` and `envoy`, where `unlimited = true`.
//! * `shadow_mode: true` is `mode = "shadow"`.
//! * A `value` left out (or empty) matches any value, each counted apart; a trailing `*` is
//!   kept, a prefix.
//! * `replaces` names another rate_limit's `name`; it becomes the ids of the rules so named.
//! * `detailed_metric` and `value_to_metric` only name ratelimit's statistics: they are
//!   dropped, with a comment line saying so, as are settings that have no effect
//!   (`shadow_mode` on a descriptor without a rate_limit or on an unlimited one). `false` for
//!   any setting is its default and is simply read.
//! * A null value (`field: ~`, or nothing after the colon) is the field left out, as in
//!   ratelimit.
//!
//! # Rule ids
//!
//! A rule's id is its rate_limit's `name`, else one made from the domain and the path, each
//! entry as ratelimit names it (`key`, or `key_value`) with the characters an id cannot have
//! as `_`: `path: /login`, then `user`, in domain `edge`, is `edge.path_login.user`. Ids are
//! made valid and unique rather than refused: a `name` that is not a valid id has each other
//! character replaced by `_`; a made id longer than 64 bytes is cut; an id already taken gets
//! the first free suffix `-2`, `-3`, ... Names are given out first, in file order, then made
//! ids, so a name keeps its id. Each change is said in a comment above the rule.
//!
//! # What is refused
//!
//! Every problem is reported, not only the first, in file order:
//!
//! * YAML that cannot be read, a field given twice in a mapping, more than one document, an
//!   empty file, a value with an explicit tag, a merge key (`<<`);
//! * a field ratelimit does not have, or has elsewhere (with "did you mean" for near misses);
//! * a missing or empty `domain`; a descriptor without a `key`; two descriptors of one list
//!   that ratelimit files under the same name (same key and value);
//! * a `*` in a key, or anywhere but at the end of a value (ratelimit's wildcards in the middle);
//! * a rate_limit without `unit` or `requests_per_unit`, an unknown unit, `requests_per_unit`
//!   of 0 (tollgate limits are at least 1) or above ratelimit's 32-bit range, `unit` or
//!   `requests_per_unit` next to `unlimited: true`;
//! * a `replaces` entry without a name, naming its own rate_limit, or naming no rate_limit
//!   of the file;
//! * `quota_mode: true`, `share_threshold: true` and `metadata`, which tollgate has no
//!   equivalent for;
//! * descriptors nested more than 32 deep (and any YAML nested more than 200 deep, refused
//!   before it is loaded), and a file with no rate_limit at all (an empty rule file limits
//!   nothing and is refused by tollgate).
//!
//! No input makes [`migrate`] panic.

mod config;
mod descriptor;
mod document;
mod error;
mod fields;
mod ids;
mod rate_limit;
mod rules;
mod unit;
mod values;
mod write;
mod yaml;

pub use error::{MigrationError, MigrationErrors};

use error::{At, Report};

/// The tollgate rule file (TOML) for the envoyproxy/ratelimit configuration `yaml`, read from
/// the file `file_name` (named in the errors and in the output's header comment).
///
/// ```
/// use tollgate_envoy::migrate::migrate;
///
/// let yaml = "\
/// domain: edge
/// descriptors:
///   - key: client
///     value: internal*
///     rate_limit: {unlimited: true}
/// ";
/// let rules = migrate("ratelimit.yaml", yaml)?;
/// assert_eq!(
///     rules,
///     r#"# Generated by tollgate-envoy from the envoyproxy/ratelimit configuration "ratelimit.yaml"
/// ## (domain "edge"): one rule per descriptor with a rate_limit.
///
/// [[rule]]
/// id = "edge.client_internal"
/// envoy = { domain = "edge", descriptor = [{ key = "client", value = "internal*" }], unlimited = true }
/// "#
/// );
/// # Ok::<(), tollgate_envoy::migrate::MigrationErrors>(())
/// ```
///
/// # Errors
///
/// Every problem found, each at its line and column (see the [module](self) for what is
/// refused).
pub fn migrate(file_name: &str, yaml: &str) -> Result<String, MigrationErrors> {
    let mut report = Report::new(file_name);
    let plan = match yaml::document(yaml) {
        Ok(document) => document::config(document.as_ref(), &mut report)
            .map(|config| rules::plan(&config, &mut report)),
        Err((at, message)) => {
            report.at(at, message);
            None
        }
    };
    match (report.finish(), plan) {
        (None, Some(plan)) => Ok(write::rule_file(file_name, &plan)),
        (Some(errors), _) => Err(errors),
        // Whatever is not read is reported, so this is not reached; answered all the same.
        (None, None) => Err(MigrationErrors::one(
            file_name,
            At::START,
            "the file cannot be read as a ratelimit configuration",
        )),
    }
}
