//! Helpers shared by the rule-file tests.

/// The mistakes a rule file reports, as `line:column: message` (none for a valid file).
pub(crate) fn config_errors(text: &str, extractors: &tollgate_config::Extractors) -> Vec<String> {
    match tollgate_config::RuleFile::parse("rules.toml", text, extractors) {
        Ok(_) => Vec::new(),
        Err(errors) => errors
            .iter()
            .map(|error| format!("{}:{}: {}", error.line, error.column, error.message))
            .collect(),
    }
}
