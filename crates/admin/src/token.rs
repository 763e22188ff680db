//! Named admin tokens, kept only as SHA-256 digests and compared in constant time.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The shortest secret accepted: 16 bytes (128 bits when random) cannot be guessed online.
pub const MIN_SECRET_BYTES: usize = 16;

/// One admin token: a name (logged with every change it makes) and the SHA-256 digest of its
/// secret (the secret itself is not kept).
///
/// ```
/// use tollgate_admin::AdminToken;
///
/// let oncall = AdminToken::new("on-call", "f3c9a1b2d4e5f60718293a4b5c6d7e8f")?;
/// // Or from a digest, so the secret never sits in the service's configuration:
/// // printf %s "$TOKEN" | sha256sum
/// let ci = AdminToken::from_sha256_hex(
///     "deploy-bot",
///     "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
/// )?;
/// # let _ = (oncall, ci);
/// # Ok::<(), tollgate_admin::TokenError>(())
/// ```
#[derive(Clone)]
pub struct AdminToken {
    name: String,
    digest: [u8; 32],
}

/// Why a token was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// Names are 1–64 letters, digits, `-`, `_` or `.` (they go into logs).
    #[error("token name {0:?} is not 1–64 letters, digits, '-', '_' or '.'")]
    InvalidName(String),
    /// The secret is too short to be safe (an empty environment variable, say).
    #[error(
        "the secret of token {name:?} is {bytes} bytes; use at least {MIN_SECRET_BYTES} random bytes"
    )]
    WeakSecret {
        /// The token's name.
        name: String,
        /// The secret's length.
        bytes: usize,
    },
    /// A secret that starts or ends with white space (a stray newline from a file, say):
    /// `Authorization` headers cannot carry it.
    #[error("the secret of token {0:?} starts or ends with white space; trim it")]
    UntrimmedSecret(String),
    /// A digest that is not 64 hex digits.
    #[error("the digest of token {0:?} is not 64 hex digits (a SHA-256 digest)")]
    InvalidDigest(String),
}

impl AdminToken {
    /// A token named `name` whose secret is `secret` (at least [`MIN_SECRET_BYTES`]).
    pub fn new(name: &str, secret: impl AsRef<[u8]>) -> Result<AdminToken, TokenError> {
        let secret = secret.as_ref();
        let name = valid_name(name)?;
        if secret.first().is_some_and(u8::is_ascii_whitespace)
            || secret.last().is_some_and(u8::is_ascii_whitespace)
        {
            return Err(TokenError::UntrimmedSecret(name));
        }
        if secret.len() < MIN_SECRET_BYTES {
            return Err(TokenError::WeakSecret {
                name,
                bytes: secret.len(),
            });
        }
        Ok(AdminToken {
            name,
            digest: Sha256::digest(secret).into(),
        })
    }

    /// A token named `name` known by the SHA-256 digest of its secret, as 64 hex digits.
    pub fn from_sha256_hex(name: &str, digest: &str) -> Result<AdminToken, TokenError> {
        let name = valid_name(name)?;
        let digest =
            decode_hex(digest.trim()).ok_or_else(|| TokenError::InvalidDigest(name.clone()))?;
        Ok(AdminToken { name, digest })
    }

    /// The token's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminToken")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Every accepted token.
#[derive(Debug, Clone)]
pub(crate) struct Tokens(Vec<AdminToken>);

impl Tokens {
    pub(crate) fn new(first: AdminToken) -> Tokens {
        Tokens(vec![first])
    }

    pub(crate) fn add(&mut self, token: AdminToken) {
        self.0.push(token);
    }

    /// The name of the token whose secret `presented` is, if any. Every digest is compared in
    /// full whatever matched, so the time taken says nothing about which token, or how much of
    /// one, was right.
    pub(crate) fn verify(&self, presented: &[u8]) -> Option<&str> {
        let digest: [u8; 32] = Sha256::digest(presented).into();
        let mut found = None;
        for token in &self.0 {
            if bool::from(token.digest.ct_eq(&digest)) {
                found = found.or(Some(token.name.as_str()));
            }
        }
        found
    }
}

fn valid_name(name: &str) -> Result<String, TokenError> {
    let valid = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.'));
    if valid {
        Ok(name.to_owned())
    } else {
        Err(TokenError::InvalidName(name.to_owned()))
    }
}

fn decode_hex(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (at, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(at * 2..at * 2 + 2)?, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_known_by_its_secret_and_by_its_digest() {
        let secret = "correct horse battery staple";
        let hex: String = Sha256::digest(secret.as_bytes())
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        let mut tokens = Tokens::new(
            AdminToken::new("alice", "another secret of 32 bytes......").expect("valid"),
        );
        tokens.add(AdminToken::from_sha256_hex("bob", &hex).expect("valid"));
        assert_eq!(tokens.verify(secret.as_bytes()), Some("bob"));
        assert_eq!(
            tokens.verify(b"another secret of 32 bytes......"),
            Some("alice")
        );
        assert_eq!(tokens.verify(b"correct horse battery stapl"), None);
        assert_eq!(tokens.verify(b""), None);
    }

    #[test]
    fn weak_secrets_bad_names_and_bad_digests_are_refused() {
        assert!(matches!(
            AdminToken::new("a", ""),
            Err(TokenError::WeakSecret { bytes: 0, .. })
        ));
        assert!(matches!(
            AdminToken::new("a b", "0123456789abcdef"),
            Err(TokenError::InvalidName(_))
        ));
        assert!(matches!(
            AdminToken::from_sha256_hex("a", "zz"),
            Err(TokenError::InvalidDigest(_))
        ));
        let debug = format!(
            "{:?}",
            AdminToken::new("a", "0123456789abcdef").expect("valid")
        );
        assert!(!debug.contains("digest"), "{debug}");
    }
}
