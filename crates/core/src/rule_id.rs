//! The name of a rule (its policy name), safe to put in a stored key or a header.

use std::fmt;
use std::sync::Arc;

use crate::RuleIdError;

/// A rule's id: 1 to [`RuleId::MAX_LEN`] bytes of `A-Z a-z 0-9 _ - .`.
///
/// The id names the policy in `RateLimit-Policy` headers and is part of every stored key, so the
/// character set is closed: it can never inject a Redis Cluster hash tag (`{`), a key separator
/// (`:`) or a header delimiter. Cloning is cheap (a reference count).
///
/// ```
/// use tollgate_core::RuleId;
/// let id = RuleId::new("follows-per-day")?;
/// assert_eq!(id.as_str(), "follows-per-day");
/// assert!(RuleId::new("a{b}").is_err());
/// # Ok::<(), tollgate_core::RuleIdError>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId(Arc<str>);

impl RuleId {
    /// The longest accepted id, in bytes.
    pub const MAX_LEN: usize = 64;

    /// Checks and wraps `id`.
    pub fn new(id: &str) -> Result<RuleId, RuleIdError> {
        if id.is_empty() {
            return Err(RuleIdError::Empty);
        }
        if id.len() > RuleId::MAX_LEN {
            return Err(RuleIdError::TooLong {
                len: id.len(),
                max: RuleId::MAX_LEN,
            });
        }
        if let Some(found) = id
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
        {
            return Err(RuleIdError::InvalidCharacter { found });
        }
        Ok(RuleId(Arc::from(id)))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<&str> for RuleId {
    type Error = RuleIdError;

    fn try_from(id: &str) -> Result<Self, Self::Error> {
        RuleId::new(id)
    }
}

impl fmt::Debug for RuleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for RuleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for RuleId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_ids_are_refused_with_the_reason() {
        assert_eq!(RuleId::new(""), Err(RuleIdError::Empty));
        assert!(matches!(
            RuleId::new(&"a".repeat(65)),
            Err(RuleIdError::TooLong { len: 65, .. })
        ));
        assert_eq!(
            RuleId::new("a:b"),
            Err(RuleIdError::InvalidCharacter { found: ':' })
        );
        assert_eq!(
            RuleId::new("é"),
            Err(RuleIdError::InvalidCharacter { found: 'é' })
        );
        assert!(RuleId::new(&"a".repeat(64)).is_ok());
    }
}
