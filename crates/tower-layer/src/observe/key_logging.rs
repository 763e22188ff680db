//! How keys appear in events: fingerprints by default, never reversible from the logs.

use tollgate_core::{FingerprintSecret, Key};

/// How keys appear in refusal events.
///
/// ```
/// use tollgate_core::FingerprintSecret;
/// use tollgate_tower::KeyLogging;
///
/// // Fingerprints that match across the fleet and across restarts: one configured secret.
/// let secret = FingerprintSecret::from_bytes(b"from the fleet's secret store")?;
/// let logging = KeyLogging::HashedWith(secret);
/// # let _ = logging;
/// # Ok::<(), tollgate_core::FingerprintSecretError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum KeyLogging {
    /// A short keyed-hash fingerprint of the key under this process's random secret
    /// ([`FingerprintSecret::process`](tollgate_core::FingerprintSecret::process)): correlatable
    /// within one gateway process, and not reversible by anyone reading the logs, even for
    /// small key spaces such as IPv4 addresses or phone numbers.
    #[default]
    Hashed,
    /// The same under a configured secret: fingerprints match on every gateway that shares it.
    HashedWith(FingerprintSecret),
    /// The key's stored bytes, escaped (`Key(\x0caccount-4821)`): readable for text keys such as
    /// account ids; IP blocks appear as their binary encoding.
    Raw,
}

impl KeyLogging {
    /// How `key` appears in a log line under this setting.
    ///
    /// ```
    /// use tollgate_core::Key;
    /// use tollgate_tower::KeyLogging;
    /// let key = Key::new("account-4821");
    /// assert_eq!(KeyLogging::Hashed.show(&key).len(), 16);
    /// assert!(KeyLogging::Raw.show(&key).contains("account-4821"));
    /// ```
    pub fn show(&self, key: &Key) -> String {
        match self {
            KeyLogging::Hashed => key.fingerprint(FingerprintSecret::process()),
            KeyLogging::HashedWith(secret) => key.fingerprint(secret),
            KeyLogging::Raw => format!("{key:?}"),
        }
    }
}
