//! Helpers shared by the integration tests of tollgate-tower and tollgate-axum (the axum crate
//! includes this module by path). Each test binary uses only some of them.
#![allow(dead_code, unused_imports)]

pub(crate) mod events;
pub(crate) mod server;
mod sf;

pub(crate) use sf::{SfMember, sf_members};

/// The mistakes a rule file reports, as `line:column: message` (none for a valid file).
#[cfg(feature = "config")]
pub(crate) fn config_errors(
    text: &str,
    extractors: &tollgate_tower::config::Extractors,
) -> Vec<String> {
    match tollgate_tower::config::RuleFile::parse("rules.toml", text, extractors) {
        Ok(_) => Vec::new(),
        Err(errors) => errors
            .iter()
            .map(|error| format!("{}:{}: {}", error.line, error.column, error.message))
            .collect(),
    }
}
