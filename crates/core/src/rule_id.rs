//! The name of a rule (its policy name), safe to put in a stored key or a header.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock};

use crate::RuleIdError;

/// Every rule id this process has made, with its number.
static REGISTRY: OnceLock<Mutex<HashMap<Arc<str>, u32>>> = OnceLock::new();

/// A rule's id: 1 to [`RuleId::MAX_LEN`] bytes of `A-Z a-z 0-9 _ - .`.
///
/// The id names the policy in `RateLimit-Policy` headers and is part of every stored key, so the
/// character set is closed: it can never inject a Redis Cluster hash tag (`{`), a key separator
/// (`:`) or a header delimiter. Cloning is cheap (a reference count).
///
/// Ids are interned: each distinct id gets a small number for the life of the process (at most
/// [`RuleId::MAX_DISTINCT`] of them), so stores find a rule's state by number, without hashing
/// or comparing its name on every check. Rule ids name policies in configuration; they are not
/// for per-caller values (those are [`Key`](crate::Key)s).
///
/// ```
/// use tollgate_core::RuleId;
/// let id = RuleId::new("follows-per-day")?;
/// assert_eq!(id.as_str(), "follows-per-day");
/// assert!(RuleId::new("a{b}").is_err());
/// # Ok::<(), tollgate_core::RuleIdError>(())
/// ```
#[derive(Clone)]
pub struct RuleId {
    number: u32,
    name: Arc<str>,
}

impl RuleId {
    /// The longest accepted id, in bytes.
    pub const MAX_LEN: usize = 64;

    /// The most distinct ids one process can make.
    pub const MAX_DISTINCT: usize = 1 << 20;

    /// Checks and wraps `id`. Ids ending in a [`DerivedSuffix`] (`.strikes`, `.block`) are
    /// refused: they name state another rule keeps (see [`derived`](RuleId::derived)).
    pub fn new(id: &str) -> Result<RuleId, RuleIdError> {
        if let Some(suffix) = DerivedSuffix::ALL
            .iter()
            .map(|suffix| suffix.as_str())
            .find(|suffix| id.ends_with(suffix))
        {
            return Err(RuleIdError::Reserved { suffix });
        }
        RuleId::checked(id)
    }

    /// The id of state this rule keeps beside its own, `<id><suffix>` (escalation's strikes and
    /// block): no id made by [`new`](RuleId::new) can equal it. An error only when the result
    /// would be too long.
    ///
    /// ```
    /// use tollgate_core::{DerivedSuffix, RuleId};
    /// let login = RuleId::new("login")?;
    /// assert_eq!(login.derived(DerivedSuffix::Block)?.as_str(), "login.block");
    /// assert!(RuleId::new("login.block").is_err());
    /// # Ok::<(), tollgate_core::RuleIdError>(())
    /// ```
    pub fn derived(&self, suffix: DerivedSuffix) -> Result<RuleId, RuleIdError> {
        RuleId::checked(&format!("{}{}", self.name, suffix.as_str()))
    }

    /// The id of sub-bucket `index` of `of` of this rule's keys (see
    /// `SubBuckets`): `<id>#<index>.<of>`. `#` is outside the characters
    /// [`new`](RuleId::new) accepts, so no rule can name it. The Redis store puts a rule id
    /// inside each key's hash tag and spreads a sub-bucket's slot into part `index` of `of`
    /// equal parts of the slot space, so the sub-buckets of one key land on different masters.
    ///
    /// ```
    /// use tollgate_core::RuleId;
    /// let partner = RuleId::new("partner")?;
    /// assert_eq!(partner.sub_bucket(3, 8).as_str(), "partner#3.8");
    /// assert!(RuleId::new("partner#3.8").is_err());
    /// # Ok::<(), tollgate_core::RuleIdError>(())
    /// ```
    pub fn sub_bucket(&self, index: u32, of: u32) -> RuleId {
        let id = format!("{}#{index}.{of}", self.name);
        RuleId::interned(&id).unwrap_or_else(|_| self.clone())
    }

    /// Checks length and characters, and interns.
    fn checked(id: &str) -> Result<RuleId, RuleIdError> {
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
        RuleId::interned(id)
    }

    /// Interns `id`, already checked.
    fn interned(id: &str) -> Result<RuleId, RuleIdError> {
        let registry = REGISTRY.get_or_init(Default::default);
        let mut registry = registry
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((name, number)) = registry.get_key_value(id) {
            return Ok(RuleId {
                number: *number,
                name: Arc::clone(name),
            });
        }
        if registry.len() >= RuleId::MAX_DISTINCT {
            return Err(RuleIdError::TooMany {
                max: RuleId::MAX_DISTINCT,
            });
        }
        let number = u32::try_from(registry.len()).unwrap_or(u32::MAX);
        let name: Arc<str> = Arc::from(id);
        registry.insert(Arc::clone(&name), number);
        Ok(RuleId { number, name })
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.name
    }

    /// This id's number in this process: equal ids have equal numbers.
    pub(crate) fn number(&self) -> u32 {
        self.number
    }
}

/// A suffix reserved for state a rule keeps beside its own; see [`RuleId::derived`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DerivedSuffix {
    /// `.strikes`: an escalating rule's count of refusals.
    Strikes,
    /// `.block`: an escalating rule's block.
    Block,
}

impl DerivedSuffix {
    const ALL: [DerivedSuffix; 2] = [DerivedSuffix::Strikes, DerivedSuffix::Block];

    /// The suffix as text.
    pub fn as_str(self) -> &'static str {
        match self {
            DerivedSuffix::Strikes => ".strikes",
            DerivedSuffix::Block => ".block",
        }
    }
}

impl PartialEq for RuleId {
    fn eq(&self, other: &Self) -> bool {
        self.number == other.number
    }
}

impl Eq for RuleId {}

impl Hash for RuleId {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.number.hash(state);
    }
}

impl PartialOrd for RuleId {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for RuleId {
    fn cmp(&self, other: &Self) -> Ordering {
        self.name.cmp(&other.name)
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
        fmt::Debug::fmt(&*self.name, f)
    }
}

impl fmt::Display for RuleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

impl AsRef<str> for RuleId {
    fn as_ref(&self) -> &str {
        &self.name
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

    #[test]
    fn equal_ids_are_one_rule() {
        let (a, b) = (
            RuleId::new("same-rule").unwrap(),
            RuleId::new("same-rule").unwrap(),
        );
        assert_eq!(a, b);
        assert_eq!(a.number(), b.number());
        assert_ne!(a, RuleId::new("other-rule").unwrap());
    }
}
