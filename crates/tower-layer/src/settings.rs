//! Layer-wide settings: headers, the responder hook, exemptions, how keys appear in events.

use std::time::Duration;

use tollgate_core::{FingerprintSecret, Key};

use crate::headers::HeaderStyle;
use crate::headers::refused::Responder;
use crate::rules::exemptions::Exemptions;
use crate::rules::registry::QuotaRegistry;

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

/// Everything layer-wide that is not the store or the rules.
#[derive(Clone)]
pub(crate) struct Settings {
    pub(crate) header_style: HeaderStyle,
    pub(crate) responder: Option<Responder>,
    pub(crate) key_logging: KeyLogging,
    pub(crate) unavailable_retry_after: Duration,
    pub(crate) exemptions: Exemptions,
    pub(crate) registry: Option<QuotaRegistry>,
    /// This gateway's number, for split rules' parts.
    pub(crate) gateway: Option<u32>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            header_style: HeaderStyle::default(),
            responder: None,
            key_logging: KeyLogging::default(),
            unavailable_retry_after: Duration::from_secs(1),
            exemptions: Exemptions::default(),
            registry: None,
            gateway: None,
        }
    }
}
