//! JSON as a rule file writes it: a `PATCH`'s field values, and a rule sent as a JSON object
//! (`PUT` with `Content-Type: application/json`) as its `[[rule]]` table. The mapping is one to
//! one — an object is a table, an array an array, a string a string — because TOML holds every
//! JSON value but `null`; what it makes is then checked as any rule file is.

use serde_json::{Map, Value};

/// A JSON value that has no TOML form: a `null`, at the path of object keys and array indices
/// that leads to it (`refill.per`, `match.method[1]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NullAt(pub(crate) String);

impl NullAt {
    /// The same null, inside the field `name`.
    pub(crate) fn under(self, name: &str) -> NullAt {
        let NullAt(rest) = self;
        if rest.is_empty() || rest.starts_with('[') {
            NullAt(format!("{name}{rest}"))
        } else {
            NullAt(format!("{name}.{rest}"))
        }
    }
}

/// `fields` as a rule file's `[[rule]]` table, one field a line.
pub(crate) fn rule_table(fields: &Map<String, Value>) -> Result<String, NullAt> {
    let mut table = String::from("[[rule]]\n");
    for (name, value) in fields {
        table.push_str(&key(name));
        table.push_str(" = ");
        table.push_str(&toml_value(value).map_err(|null| null.under(name))?);
        table.push('\n');
    }
    Ok(table)
}

/// `value` as a TOML inline value.
pub(crate) fn toml_value(value: &Value) -> Result<String, NullAt> {
    Ok(match value {
        Value::Null => return Err(NullAt(String::new())),
        Value::Bool(flag) => flag.to_string(),
        Value::Number(number) => number.to_string(),
        Value::String(text) => string(text),
        Value::Array(items) => {
            let items = items
                .iter()
                .enumerate()
                .map(|(index, item)| {
                    toml_value(item).map_err(|NullAt(at)| NullAt(format!("[{index}]{at}")))
                })
                .collect::<Result<Vec<_>, _>>()?;
            format!("[{}]", items.join(", "))
        }
        Value::Object(fields) => {
            let fields = fields
                .iter()
                .map(|(name, value)| {
                    let value = toml_value(value).map_err(|null| null.under(name))?;
                    Ok(format!("{} = {value}", key(name)))
                })
                .collect::<Result<Vec<_>, _>>()?;
            if fields.is_empty() {
                "{}".to_owned()
            } else {
                format!("{{ {} }}", fields.join(", "))
            }
        }
    })
}

/// A key: bare when TOML allows it (`limit`), else a quoted string.
fn key(name: &str) -> String {
    let bare = !name.is_empty()
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-');
    if bare { name.to_owned() } else { string(name) }
}

/// `text` as a TOML basic string: quote, backslash and every control character TOML does not
/// allow in one (JSON lets DEL through unescaped; TOML does not) escaped.
fn string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for character in text.chars() {
        match character {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            control if control.is_control() && u32::from(control) <= 0x7f => {
                out.push_str(&format!("\\u{:04X}", u32::from(control)));
            }
            other => out.push(other),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Parses `text` as TOML with the parser rule files are read with.
    fn parsed(text: &str) -> toml_span::Value<'_> {
        toml_span::parse(text).expect("valid TOML")
    }

    #[test]
    fn a_rule_object_is_its_table_field_by_field() {
        let fields = json!({
            "id": "reads",
            "match": {"method": ["GET", "HEAD"], "path": "/posts"},
            "algorithm": "fixed_window",
            "limit": 50,
            "window": "1m",
            "key": {"header": "x-api-key"},
            "disclose": true,
            "weight": 1.5,
            "odd key": {},
        });
        let table = rule_table(fields.as_object().expect("object")).expect("no null");
        assert!(table.starts_with("[[rule]]\n"), "{table}");
        assert!(table.contains("limit = 50\n"), "{table}");
        assert!(table.contains("\"odd key\" = {}\n"), "{table}");
        let document = parsed(&table);
        let field = |pointer: &str| {
            document
                .pointer(&format!("/rule/0/{pointer}"))
                .expect(pointer)
        };
        assert_eq!(field("id").as_str(), Some("reads"));
        assert_eq!(field("limit").as_integer(), Some(50));
        assert_eq!(field("disclose").as_bool(), Some(true));
        assert_eq!(field("weight").as_float(), Some(1.5));
        assert_eq!(field("match/method/1").as_str(), Some("HEAD"));
        assert_eq!(field("key/header").as_str(), Some("x-api-key"));
    }

    #[test]
    fn every_string_survives_the_trip() {
        for text in [
            "plain",
            "quote \" and backslash \\",
            "lines\nand\ttabs\r",
            "control \u{0} \u{1f} and delete \u{7f}",
            "unicode é ✓ 𝄞",
            "a \\u0041 that is text",
        ] {
            let written = format!("value = {}\n", toml_value(&json!(text)).expect("string"));
            let document = parsed(&written);
            assert_eq!(
                document.pointer("/value").and_then(|value| value.as_str()),
                Some(text),
                "{written}"
            );
        }
    }

    #[test]
    fn a_null_is_named_by_its_path() {
        let fields = json!({"refill": {"amount": 1, "per": null}});
        assert_eq!(
            rule_table(fields.as_object().expect("object")),
            Err(NullAt("refill.per".to_owned()))
        );
        let fields = json!({"match": {"method": ["GET", null]}});
        assert_eq!(
            rule_table(fields.as_object().expect("object")),
            Err(NullAt("match.method[1]".to_owned()))
        );
        assert_eq!(toml_value(&json!(null)), Err(NullAt(String::new())));
    }
}
