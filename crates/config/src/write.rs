//! Writing rules back as TOML: each table a file defined, re-rendered from what was read (so
//! comments and layout are not kept, values are), and rules built in code listed by id.

use std::fmt::Write as _;

use toml_span::Value;

use tollgate_tower::RuleSet;

/// `[[<name>]]` (or `[<name>]` when `array` is false) and the fields of `table`, `id` first,
/// each value inline.
pub(super) fn table(name: &str, array: bool, value: &Value<'_>) -> String {
    let mut out = if array {
        format!("[[{name}]]\n")
    } else {
        format!("[{name}]\n")
    };
    if let Some(table) = value.as_table() {
        let mut fields: Vec<_> = table.iter().collect();
        fields.sort_by_key(|(key, _)| (key.name != "id", key.name.clone()));
        for (key, value) in fields {
            let _ = writeln!(out, "{} = {}", bare_or_quoted(&key.name), inline(value));
        }
    }
    out
}

/// `<name> = <value>`, one line.
pub(super) fn field(name: &str, value: &Value<'_>) -> String {
    format!("{} = {}\n", bare_or_quoted(name), inline(value))
}

/// A value on one line: strings quoted and escaped, tables inline.
fn inline(value: &Value<'_>) -> String {
    if let Some(text) = value.as_str() {
        return quoted(text);
    }
    if let Some(number) = value.as_integer() {
        return number.to_string();
    }
    if let Some(number) = value.as_float() {
        return format!("{number:?}");
    }
    if let Some(flag) = value.as_bool() {
        return flag.to_string();
    }
    if let Some(items) = value.as_array() {
        let items: Vec<String> = items.iter().map(inline).collect();
        return format!("[{}]", items.join(", "));
    }
    if let Some(table) = value.as_table() {
        let mut fields: Vec<_> = table.iter().collect();
        fields.sort_by_key(|(key, _)| key.name.clone());
        let fields: Vec<String> = fields
            .into_iter()
            .map(|(key, value)| format!("{} = {}", bare_or_quoted(&key.name), inline(value)))
            .collect();
        return format!("{{ {} }}", fields.join(", "));
    }
    String::from("\"\"")
}

fn bare_or_quoted(key: &str) -> String {
    let bare = !key.is_empty()
        && key
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-');
    if bare { key.to_owned() } else { quoted(key) }
}

fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Every rule of `rules` as TOML: a rule read from a file as its table, once however many
/// route rows it has; a rule built in code as a comment naming it with `source = "code"` (its
/// key or cost may be a closure, which no file can hold). Rules from a file load again to the
/// same rules.
///
/// ```
/// use tollgate_config::{Extractors, RuleFile, rules_to_toml};
///
/// let file = RuleFile::parse("rules.toml", r#"
/// [[rule]]
/// id = "reads"
/// match = { method = ["GET", "POST"], path = "/feed" }
/// algorithm = "fixed_window"
/// limit = 50
/// window = "1s"
/// key = "peer_ip"
/// "#, &Extractors::new())?;
/// let written = rules_to_toml(file.rules());
/// let again = RuleFile::parse("written.toml", &written, &Extractors::new())?;
/// assert_eq!(rules_to_toml(again.rules()), written);
/// # Ok::<(), tollgate_config::ConfigErrors>(())
/// ```
pub fn rules_to_toml(rules: &RuleSet) -> String {
    let mut out = String::new();
    let mut written: Vec<&str> = Vec::new();
    for rule in rules.rules() {
        let id = rule.id().as_str();
        if written.contains(&id) {
            continue;
        }
        written.push(id);
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&rule_to_toml(rule));
    }
    out
}

/// One rule as [`rules_to_toml`] writes it: the table it was read from, or a comment for a rule
/// built in code.
pub(crate) fn rule_to_toml(rule: &tollgate_tower::Rule) -> String {
    match rule.source_toml() {
        Some(source) => source.to_owned(),
        None => format!(
            "# [[rule]] id = {} source = \"code\" (built in code; not written out)\n",
            quoted(rule.id().as_str())
        ),
    }
}
