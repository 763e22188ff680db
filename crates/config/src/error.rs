//! What is wrong with a rule file: every mistake, each at its line and column.

use std::fmt;

/// One mistake in a rule file: where it is and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file's name as given to [`RuleFile::parse`](crate::RuleFile::parse).
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// A sentence a person can act on.
    pub message: String,
}

/// Where something is written, kept after reading so a later check (of a file merged with a
/// fleet document) can point at it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Position {
    pub(crate) file: String,
    pub(crate) line: usize,
    pub(crate) column: usize,
}

impl Position {
    /// A mistake at this position.
    pub(crate) fn error(&self, message: impl Into<String>) -> ConfigError {
        ConfigError {
            file: self.file.clone(),
            line: self.line,
            column: self.column,
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.column, self.message
        )
    }
}

/// Every mistake found in a rule file, in the order they appear; never empty.
///
/// ```
/// use tollgate_config::{Extractors, RuleFile};
///
/// let text = "[[rule]]\nid = \"r\"\nalgorithm = \"fixed_window\"\nlimit = 0\nwindow = \"1m\"\nkey = \"peer_ip\"\n";
/// let errors = RuleFile::parse("rules.toml", text, &Extractors::new()).unwrap_err();
/// assert_eq!(errors.len(), 1);
/// assert_eq!(errors.to_string(), "rules.toml:4:9: `limit` must be at least 1, not 0");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub(crate) Vec<ConfigError>);

impl ConfigErrors {
    /// How many mistakes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Always false: there is at least one mistake.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The mistakes, in file order.
    pub fn iter(&self) -> impl Iterator<Item = &ConfigError> {
        self.0.iter()
    }

    /// A file that could not be read at all.
    pub(crate) fn unreadable(path: &std::path::Path, error: &std::io::Error) -> Self {
        ConfigErrors(vec![ConfigError {
            file: path.display().to_string(),
            line: 1,
            column: 1,
            message: format!("cannot read the file: {error}"),
        }])
    }
}

impl fmt::Display for ConfigErrors {
    /// One mistake per line, `file:line:column: message`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, error) in self.0.iter().enumerate() {
            if index > 0 {
                writeln!(f)?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// Collects mistakes against one file's text, turning byte offsets into lines and columns.
pub(crate) struct Report<'t> {
    file: &'t str,
    text: &'t str,
    errors: Vec<ConfigError>,
    /// How far [`position`](Report::position) has scanned: offset, its line, that line's start.
    scanned: (usize, usize, usize),
}

impl<'t> Report<'t> {
    pub(crate) fn new(file: &'t str, text: &'t str) -> Self {
        Report {
            file,
            text,
            errors: Vec::new(),
            scanned: (0, 1, 0),
        }
    }

    /// Records a mistake at byte `offset`.
    pub(crate) fn at(&mut self, offset: usize, message: impl Into<String>) {
        let (line, column) = line_and_column(self.text, offset);
        self.errors.push(ConfigError {
            file: self.file.to_owned(),
            line,
            column,
            message: message.into(),
        });
    }

    /// Whether anything was recorded.
    /// Where `offset` is: file, line and column. Positions asked for in the order they are
    /// written (as a file is read) cost one pass over the text in all, not one each.
    pub(crate) fn position(&mut self, offset: usize) -> Position {
        let offset = offset.min(self.text.len());
        let (from, mut line, mut line_start) = match self.scanned {
            (at, line, start) if at <= offset => (at, line, start),
            _ => (0, 1, 0),
        };
        for (index, byte) in self.text.as_bytes()[from..offset].iter().enumerate() {
            if *byte == b'\n' {
                line += 1;
                line_start = from + index + 1;
            }
        }
        self.scanned = (offset, line, line_start);
        let column = self
            .text
            .get(line_start..offset)
            .map_or(1, |before| before.chars().count() + 1);
        Position {
            file: self.file.to_owned(),
            line,
            column,
        }
    }

    /// Records a mistake found after reading (in a merge of two sources, say).
    pub(crate) fn push(&mut self, error: ConfigError) {
        self.errors.push(error);
    }

    pub(crate) fn is_clean(&self) -> bool {
        self.errors.is_empty()
    }

    /// The mistakes, in file order.
    pub(crate) fn into_errors(mut self) -> ConfigErrors {
        self.errors.sort_by_key(|error| (error.line, error.column));
        ConfigErrors(self.errors)
    }
}

/// The 1-based line and column (in characters) of byte `offset` in `text`.
fn line_and_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |at| at + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_asked_in_any_order_agree_with_a_fresh_count() {
        let text = "a = 1\nbé = 2\n[x]\ny = 3\n";
        let mut report = Report::new("f", text);
        for offset in [0, 9, 3, 14, 6, 20, 999, 2] {
            let position = report.position(offset);
            assert_eq!(
                (position.line, position.column),
                line_and_column(text, offset),
                "{offset}"
            );
        }
    }

    #[test]
    fn offsets_become_lines_and_columns() {
        let text = "a = 1\nbé = 2\n";
        assert_eq!(line_and_column(text, 0), (1, 1));
        assert_eq!(line_and_column(text, 6), (2, 1));
        assert_eq!(line_and_column(text, 9), (2, 3), "columns count characters");
        assert_eq!(line_and_column(text, 999), (3, 1));
    }
}
