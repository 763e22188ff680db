//! A store's name in a [`Stores`](crate::Stores): the characters of a rule id, and unique.

/// The longest store name, in bytes (what a rule file accepts too).
pub const MAX_STORE_NAME_LEN: usize = 64;

/// Why a store could not be added to a [`Stores`](crate::Stores) under a name.
///
/// ```
/// use tollgate_core::MemoryStore;
/// use tollgate_wrappers::Stores;
/// let error = Stores::new(MemoryStore::new()).with("home region", MemoryStore::new()).unwrap_err();
/// assert!(error.is_invalid());
/// let error = Stores::new(MemoryStore::new())
///     .with("home", MemoryStore::new())?
///     .with("home", MemoryStore::new())
///     .unwrap_err();
/// assert!(error.is_duplicate());
/// # Ok::<(), tollgate_wrappers::StoreNameError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreNameError {
    /// The name is empty, longer than [`MAX_STORE_NAME_LEN`], or has a character outside
    /// `A-Z a-z 0-9 _ - .`.
    #[error("{name:?} is not a store name: 1 to {MAX_STORE_NAME_LEN} bytes of A-Z a-z 0-9 _ - .")]
    Invalid {
        /// The name given.
        name: String,
    },
    /// Another store already has the name.
    #[error("a store is already named {name:?}")]
    Duplicate {
        /// The name given.
        name: String,
    },
}

impl StoreNameError {
    /// Whether the name itself is not a store name.
    pub fn is_invalid(&self) -> bool {
        matches!(self, StoreNameError::Invalid { .. })
    }

    /// Whether the name was already taken.
    pub fn is_duplicate(&self) -> bool {
        matches!(self, StoreNameError::Duplicate { .. })
    }
}

/// Whether `name` can name a store: 1 to [`MAX_STORE_NAME_LEN`] bytes of a rule id's
/// characters.
pub(crate) fn is_store_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_STORE_NAME_LEN
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'-' | b'.'))
}
