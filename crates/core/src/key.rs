//! Who is counted: the extracted key parts, encoded so they can never run into each other.

use std::fmt;
use std::sync::Arc;

use sha2::{Digest, Sha256};

/// Encoded keys longer than this are replaced by their SHA-256 digest.
const MAX_RAW_LEN: usize = 128;

/// Marks a digested key. A raw encoding never starts with it: raw keys are at most
/// [`MAX_RAW_LEN`] bytes, so every part length fits in one byte below `0x80`.
const DIGEST_TAG: u8 = 0xFF;

/// The caller a rule counts: one or more parts (an account id; an IP block and a route; nothing
/// at all for a global cap), encoded into a bounded byte string.
///
/// Each part is length-prefixed, so `("ab", "c")` and `("a", "bc")` are different keys. An encoding
/// longer than 128 bytes (a hostile 1 MB header, say) is replaced by a tagged SHA-256 digest, so a
/// stored key never grows without bound and a digest can never equal a short raw key. Keys are
/// scoped to a rule by the store, so equal keys under different rules never share state.
/// Cloning is cheap (a reference count).
///
/// ```
/// use tollgate_core::Key;
/// let account = Key::new("user77");
/// let block_and_route = Key::from_parts(&[b"203.0.113.0/24".as_slice(), b"/signup"]);
/// assert_ne!(Key::from_parts(&[b"ab".as_slice(), b"c"]), Key::from_parts(&[b"a".as_slice(), b"bc"]));
/// assert!(Key::new(vec![b'x'; 1_000_000]).as_bytes().len() <= 33);
/// assert_eq!(Key::global().as_bytes(), b"");
/// # let _ = (account, block_and_route);
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key(Arc<[u8]>);

impl Key {
    /// A key of one part.
    pub fn new(part: impl AsRef<[u8]>) -> Key {
        Key::from_parts(&[part.as_ref()])
    }

    /// A key of several parts, in order.
    pub fn from_parts(parts: &[&[u8]]) -> Key {
        let encoded_len: usize = parts.iter().map(|part| part.len().saturating_add(1)).sum();
        if encoded_len > MAX_RAW_LEN {
            return Key::digest(parts);
        }
        let mut bytes = Vec::with_capacity(encoded_len);
        for part in parts {
            // Every part is shorter than MAX_RAW_LEN here, so its length fits in one byte < 0x80.
            bytes.push(u8::try_from(part.len()).unwrap_or(u8::MAX));
            bytes.extend_from_slice(part);
        }
        Key(Arc::from(bytes))
    }

    /// Starts a key part by part, for extractors that produce parts one at a time (an account,
    /// then a route) without collecting them first.
    ///
    /// ```
    /// use tollgate_core::Key;
    /// let mut builder = Key::builder();
    /// builder.part(b"account-4821");
    /// builder.part(b"/posts");
    /// assert_eq!(builder.build(), Key::from_parts(&[b"account-4821".as_slice(), b"/posts"]));
    /// ```
    pub fn builder() -> KeyBuilder {
        KeyBuilder { parts: Vec::new() }
    }

    /// The key with no parts: one shared count for everyone (a global cap).
    pub fn global() -> Key {
        Key(Arc::from(&[][..]))
    }

    fn digest(parts: &[&[u8]]) -> Key {
        let mut hasher = Sha256::new();
        for part in parts {
            hasher.update((part.len() as u64).to_le_bytes());
            hasher.update(part);
        }
        let mut bytes = Vec::with_capacity(33);
        bytes.push(DIGEST_TAG);
        bytes.extend_from_slice(&hasher.finalize());
        Key(Arc::from(bytes))
    }

    /// The canonical encoding stores use (at most 128 bytes).
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// A short, stable fingerprint of the key (the first 8 bytes of its SHA-256, in hex): for logs
    /// that must correlate a caller across gateways without showing who it is.
    ///
    /// ```
    /// use tollgate_core::Key;
    /// let fingerprint = Key::new("user77").fingerprint();
    /// assert_eq!(fingerprint.len(), 16);
    /// assert_eq!(fingerprint, Key::new("user77").fingerprint());
    /// assert_ne!(fingerprint, Key::new("user78").fingerprint());
    /// ```
    pub fn fingerprint(&self) -> String {
        Sha256::digest(&self.0)
            .iter()
            .take(8)
            .map(|byte| format!("{byte:02x}"))
            .collect()
    }

    /// Whether the parts were too long and the key is their digest.
    pub fn is_digest(&self) -> bool {
        self.0.first() == Some(&DIGEST_TAG)
    }
}

/// Builds a [`Key`] one part at a time; see [`Key::builder`].
#[derive(Debug, Clone, Default)]
pub struct KeyBuilder {
    /// Each part as `u32` little-endian length, then its bytes.
    parts: Vec<u8>,
}

impl KeyBuilder {
    /// Appends a part.
    pub fn part(&mut self, part: impl AsRef<[u8]>) -> &mut Self {
        let part = part.as_ref();
        self.parts
            .extend_from_slice(&u32::try_from(part.len()).unwrap_or(u32::MAX).to_le_bytes());
        self.parts.extend_from_slice(part);
        self
    }

    /// The key made of the parts appended so far.
    pub fn build(&self) -> Key {
        let mut parts: Vec<&[u8]> = Vec::new();
        let mut rest = self.parts.as_slice();
        while let Some((len, tail)) = rest.split_first_chunk::<4>() {
            let len = usize::try_from(u32::from_le_bytes(*len))
                .unwrap_or(usize::MAX)
                .min(tail.len());
            let (part, tail) = tail.split_at(len);
            parts.push(part);
            rest = tail;
        }
        Key::from_parts(&parts)
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key(")?;
        for byte in self.0.iter() {
            write!(f, "{}", std::ascii::escape_default(*byte))?;
        }
        write!(f, ")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_keys_are_digested_and_do_not_collide() {
        let a = Key::new(vec![b'a'; 1 << 20]);
        let b = Key::new(vec![b'b'; 1 << 20]);
        assert!(a.is_digest() && b.is_digest());
        assert_ne!(a, b);
        assert_eq!(a.as_bytes().len(), 33);
        let at_limit = Key::new(vec![b'a'; MAX_RAW_LEN - 1]);
        assert!(!at_limit.is_digest());
        assert_eq!(at_limit.as_bytes().len(), MAX_RAW_LEN);
    }

    #[test]
    fn part_boundaries_matter() {
        assert_ne!(Key::new(""), Key::global());
        assert_ne!(Key::from_parts(&[b"a".as_slice(), b""]), Key::new("a"));
    }
}
