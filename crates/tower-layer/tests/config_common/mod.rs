//! Helpers shared by the rule-file tests (feature `config`).

/// The mistakes a rule file reports, as `line:column: message` (none for a valid file).
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
