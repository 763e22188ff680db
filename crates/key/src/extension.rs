//! A typed request extension as the key: the account that auth middleware inserted.

use std::marker::PhantomData;

use http::request::Parts;

use super::{KeyBuilder, KeyExtractor};

/// Counts by a typed request extension, such as the account id an authentication middleware
/// inserted; `to_key` turns the extension into key bytes. Requests without the extension (an
/// anonymous caller) have no key.
///
/// ```
/// use tollgate_key::ExtensionKey;
///
/// #[derive(Clone)]
/// struct AccountId(u64);
///
/// let per_account = ExtensionKey::new(|account: &AccountId| account.0.to_be_bytes());
/// # let _ = per_account;
/// ```
pub struct ExtensionKey<T, F> {
    to_key: F,
    extension: PhantomData<fn(&T)>,
}

impl<T, F> std::fmt::Debug for ExtensionKey<T, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExtensionKey")
            .field("extension", &std::any::type_name::<T>())
            .finish_non_exhaustive()
    }
}

impl<T, F, K> ExtensionKey<T, F>
where
    T: Send + Sync + 'static,
    F: Fn(&T) -> K + Send + Sync + 'static,
    K: AsRef<[u8]>,
{
    /// Counts by extension `T`, keyed by `to_key(&T)`.
    pub fn new(to_key: F) -> Self {
        ExtensionKey {
            to_key,
            extension: PhantomData,
        }
    }
}

impl<T, F: Clone> Clone for ExtensionKey<T, F> {
    fn clone(&self) -> Self {
        ExtensionKey {
            to_key: self.to_key.clone(),
            extension: PhantomData,
        }
    }
}

impl<T, F, K> KeyExtractor for ExtensionKey<T, F>
where
    T: Send + Sync + 'static,
    F: Fn(&T) -> K + Send + Sync + 'static,
    K: AsRef<[u8]>,
{
    fn extract(&self, request: &Parts, key: &mut KeyBuilder) -> bool {
        match request.extensions.get::<T>() {
            Some(extension) => {
                key.part((self.to_key)(extension));
                true
            }
            None => false,
        }
    }
}
