//! Fingerprints of keys for logs: a keyed hash, so that a log reader cannot turn one back into
//! the IP address or phone number it stands for by hashing every candidate.

use std::fmt;
use std::sync::OnceLock;

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The secret that makes key fingerprints unguessable: an HMAC-SHA-256 key.
///
/// A fingerprint made without a secret (a plain hash) of a small space — every IPv4 address,
/// every phone number — is reversed by hashing the whole space, in minutes. With a secret the
/// log reader cannot compute a single candidate. [`FingerprintSecret::process`] is a random
/// secret drawn once per process (the default: fingerprints correlate within one gateway and
/// one run); configure the same [`from_bytes`](FingerprintSecret::from_bytes) secret on every
/// gateway for fingerprints that match across a fleet and across restarts.
///
/// `Debug` never shows the secret.
///
/// ```
/// use tollgate_core::{FingerprintSecret, Key};
///
/// let fleet = FingerprintSecret::from_bytes(b"a secret from the fleet's config store")?;
/// let key = Key::new("203.0.113.7");
/// assert_eq!(key.fingerprint(&fleet), key.fingerprint(&fleet));
/// assert_ne!(key.fingerprint(&fleet), key.fingerprint(FingerprintSecret::process()));
/// assert_eq!(format!("{fleet:?}"), "FingerprintSecret(..)");
/// # Ok::<(), tollgate_core::FingerprintSecretError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct FingerprintSecret([u8; 32]);

/// A configured fingerprint secret was too short to be secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "a fingerprint secret needs at least {min} bytes, got {got}",
    min = FingerprintSecret::MIN_LEN
)]
pub struct FingerprintSecretError {
    got: usize,
}

impl FingerprintSecret {
    /// The shortest secret accepted, in bytes.
    pub const MIN_LEN: usize = 16;

    /// A secret from configuration (at least [`MIN_LEN`](Self::MIN_LEN) bytes; longer secrets
    /// are hashed down to 32 bytes).
    pub fn from_bytes(secret: &[u8]) -> Result<Self, FingerprintSecretError> {
        if secret.len() < Self::MIN_LEN {
            return Err(FingerprintSecretError { got: secret.len() });
        }
        use sha2::Digest as _;
        Ok(FingerprintSecret(Sha256::digest(secret).into()))
    }

    /// A fresh random secret from the operating system.
    ///
    /// # Panics
    ///
    /// When the operating system has no randomness to give (`getrandom` fails), which on the
    /// platforms tollgate runs on means the system is broken.
    pub fn random() -> Self {
        let mut secret = [0_u8; 32];
        getrandom::fill(&mut secret).expect("the operating system provides random bytes");
        FingerprintSecret(secret)
    }

    /// This process's secret, drawn at random on first use.
    pub fn process() -> &'static FingerprintSecret {
        static PROCESS: OnceLock<FingerprintSecret> = OnceLock::new();
        PROCESS.get_or_init(FingerprintSecret::random)
    }

    /// The fingerprint of a key's stored bytes: the first 8 bytes of HMAC-SHA-256(secret,
    /// key), in hex.
    pub(crate) fn fingerprint(&self, key: &[u8]) -> String {
        // HMAC takes a key of any length, so this cannot fail.
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("any key length");
        mac.update(key);
        mac.finalize()
            .into_bytes()
            .iter()
            .take(8)
            .map(|byte| format!("{byte:02x}"))
            .collect()
    }
}

impl fmt::Debug for FingerprintSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FingerprintSecret(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Key;

    #[test]
    fn fingerprints_depend_on_the_secret_and_the_key() {
        let a = FingerprintSecret::from_bytes(&[1; 16]).unwrap();
        let b = FingerprintSecret::from_bytes(&[2; 16]).unwrap();
        let key = Key::new("198.51.100.7");
        assert_eq!(key.fingerprint(&a).len(), 16);
        assert_ne!(key.fingerprint(&a), key.fingerprint(&b));
        assert_ne!(
            key.fingerprint(&a),
            Key::new("198.51.100.8").fingerprint(&a)
        );
        assert_ne!(FingerprintSecret::random(), FingerprintSecret::random());
    }

    #[test]
    fn short_secrets_are_refused() {
        assert!(FingerprintSecret::from_bytes(&[7; 15]).is_err());
    }
}
