//! What cannot be migrated: every problem, each at its line and column of the YAML file.

use std::fmt;

/// One problem in a ratelimit configuration: where it is, why it cannot become a tollgate
/// rule, and what to do.
///
/// ```
/// use tollgate_envoy::migrate::migrate;
///
/// let errors = migrate("config.yaml", "descriptors: []\n").unwrap_err();
/// let first = errors.iter().next().unwrap();
/// assert_eq!((first.file(), first.line(), first.column()), ("config.yaml", 1, 1));
/// assert!(first.message().starts_with("the file has no `domain`"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationError {
    file: String,
    line: usize,
    column: usize,
    message: String,
}

impl MigrationError {
    /// The YAML file's name, as given to [`migrate`](super::migrate).
    pub fn file(&self) -> &str {
        &self.file
    }

    /// 1-based line.
    pub fn line(&self) -> usize {
        self.line
    }

    /// 1-based column, in characters.
    pub fn column(&self) -> usize {
        self.column
    }

    /// A sentence saying what is wrong and what to do about it.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for MigrationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.column, self.message
        )
    }
}

impl std::error::Error for MigrationError {}

/// Every problem found in a ratelimit configuration, in file order; never empty.
///
/// Displayed one problem a line, `file:line:column: message`:
///
/// ```
/// use tollgate_envoy::migrate::migrate;
///
/// let yaml = "domain: edge\ndescriptors:\n  - value: a\n    rate_limit: {unit: fortnight, requests_per_unit: 5}\n";
/// let errors = migrate("config.yaml", yaml).unwrap_err();
/// assert_eq!(errors.len(), 2);
/// let text = errors.to_string();
/// let lines: Vec<&str> = text.lines().collect();
/// assert!(lines[0].starts_with("config.yaml:3:5: this descriptor has no `key`"));
/// assert!(lines[1].starts_with("config.yaml:4:24: unknown unit \"fortnight\""));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationErrors(Vec<MigrationError>);

impl MigrationErrors {
    /// The one problem `message` at `at` of `file`.
    pub(crate) fn one(file: &str, at: At, message: &str) -> Self {
        MigrationErrors(vec![MigrationError {
            file: file.to_owned(),
            line: at.line,
            column: at.column,
            message: message.to_owned(),
        }])
    }

    /// How many problems.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Always false: there is at least one problem.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The problems, in file order.
    pub fn iter(&self) -> impl Iterator<Item = &MigrationError> {
        self.0.iter()
    }
}

impl<'a> IntoIterator for &'a MigrationErrors {
    type Item = &'a MigrationError;
    type IntoIter = std::slice::Iter<'a, MigrationError>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl fmt::Display for MigrationErrors {
    /// One problem per line, `file:line:column: message`.
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

impl std::error::Error for MigrationErrors {}

/// A place in the YAML file: 1-based line and column (in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct At {
    pub(crate) line: usize,
    pub(crate) column: usize,
}

impl At {
    /// The file's start, for what has no better place (an empty file).
    pub(crate) const START: At = At { line: 1, column: 1 };
}

/// Collects problems against one file.
pub(crate) struct Report<'f> {
    file: &'f str,
    errors: Vec<MigrationError>,
}

impl<'f> Report<'f> {
    pub(crate) fn new(file: &'f str) -> Self {
        Report {
            file,
            errors: Vec::new(),
        }
    }

    /// Records a problem at `at`.
    pub(crate) fn at(&mut self, at: At, message: impl Into<String>) {
        self.errors.push(MigrationError {
            file: self.file.to_owned(),
            line: at.line,
            column: at.column,
            message: message.into(),
        });
    }

    /// Whether any problem was recorded.
    pub(crate) fn has_errors(&self) -> bool {
        !self.errors.is_empty()
    }

    /// The problems in file order, or `None` when there is none.
    pub(crate) fn finish(mut self) -> Option<MigrationErrors> {
        // Stable: two problems at one place keep the order they were found in.
        self.errors.sort_by_key(|error| (error.line, error.column));
        (!self.errors.is_empty()).then_some(MigrationErrors(self.errors))
    }
}
