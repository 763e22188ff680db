//! Who is counted: the extracted key parts, encoded so they can never run into each other.

use std::fmt;
use std::sync::Arc;

use sha2::{Digest, Sha256};
use smallvec::SmallVec;

use crate::FingerprintSecret;

/// Encoded keys longer than this are replaced by their SHA-256 digest.
const MAX_RAW_LEN: usize = 128;

/// Marks a digested key. A raw encoding never starts with it: raw keys are at most
/// [`MAX_RAW_LEN`] bytes, so every part length fits in one byte below `0x80`.
const DIGEST_TAG: u8 = 0xFF;

/// Marks a key no caller can have ([`Key::reserved`]): neither a part length (below `0x80`)
/// nor [`DIGEST_TAG`].
const RESERVED_TAG: u8 = 0xFE;

/// The caller a rule counts: one or more parts (an account id; an IP block and a route; nothing
/// at all for a global cap), encoded into a bounded byte string.
///
/// Each part is length-prefixed, so `("ab", "c")` and `("a", "bc")` are different keys. An encoding
/// longer than 128 bytes (a hostile 1 MB header, say) is replaced by a tagged SHA-256 digest, so a
/// stored key never grows without bound and a digest can never equal a short raw key. Keys are
/// scoped to a rule by the store, so equal keys under different rules never share state.
///
/// A key of up to 38 encoded bytes — an account id, an IP block and a route, a digest — is held
/// in place, so extracting one allocates nothing; a longer one (up to 128 bytes) is shared
/// behind a reference count. Cloning is cheap either way.
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
#[derive(Clone)]
pub struct Key(Repr);

/// The longest encoding held in place: room for a digest (33 bytes), and the key stays 40
/// bytes in all.
const INLINE: usize = 38;

#[derive(Clone)]
enum Repr {
    Inline { len: u8, bytes: [u8; INLINE] },
    Shared(Arc<[u8]>),
}

impl PartialEq for Key {
    #[inline]
    fn eq(&self, other: &Key) -> bool {
        match (&self.0, &other.0) {
            // Whole arrays: an inline key's unused bytes are always zero, so equal keys are
            // equal arrays, compared without a call to `memcmp`.
            (
                Repr::Inline { len, bytes },
                Repr::Inline {
                    len: other_len,
                    bytes: other_bytes,
                },
            ) => len == other_len && bytes == other_bytes,
            (Repr::Shared(bytes), Repr::Shared(other_bytes)) => bytes == other_bytes,
            // A key is held in place exactly when it fits: the two cannot be equal.
            _ => false,
        }
    }
}

impl Eq for Key {}

impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Key) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Key) -> std::cmp::Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

impl Key {
    /// A key of one part.
    pub fn new(part: impl AsRef<[u8]>) -> Key {
        Key::from_parts(&[part.as_ref()])
    }

    /// A key no caller can have (its first byte is neither a part length nor the digest tag),
    /// for state a store wrapper keeps beside callers' under a rule: `name` says what it is.
    pub(crate) fn reserved(name: &str) -> Key {
        let mut bytes = Vec::with_capacity(name.len() + 1);
        bytes.push(RESERVED_TAG);
        bytes.extend_from_slice(name.as_bytes());
        Key::from_encoding(&bytes)
    }

    /// A key of several parts, in order.
    pub fn from_parts(parts: &[&[u8]]) -> Key {
        let mut builder = Key::builder();
        for part in parts {
            builder.part(part);
        }
        builder.build()
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
        KeyBuilder::default()
    }

    /// The key with no parts: one shared count for everyone (a global cap).
    pub fn global() -> Key {
        Key::from_encoding(&[])
    }

    /// A key holding `encoding` as it is: in place when it fits.
    fn from_encoding(encoding: &[u8]) -> Key {
        match u8::try_from(encoding.len()) {
            Ok(len) if encoding.len() <= INLINE => {
                let mut bytes = [0; INLINE];
                bytes[..encoding.len()].copy_from_slice(encoding);
                Key(Repr::Inline { len, bytes })
            }
            _ => Key(Repr::Shared(Arc::from(encoding))),
        }
    }

    /// The canonical encoding stores use (at most 128 bytes).
    #[inline]
    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Repr::Shared(bytes) => bytes,
        }
    }

    /// A short fingerprint of the key under `secret` (the first 8 bytes of an HMAC-SHA-256, in
    /// hex): for logs that must correlate a caller without showing who it is, and that no one
    /// without the secret can reverse by hashing candidates (see [`FingerprintSecret`]).
    ///
    /// ```
    /// use tollgate_core::{FingerprintSecret, Key};
    /// let secret = FingerprintSecret::process();
    /// let fingerprint = Key::new("user77").fingerprint(secret);
    /// assert_eq!(fingerprint.len(), 16);
    /// assert_eq!(fingerprint, Key::new("user77").fingerprint(secret));
    /// assert_ne!(fingerprint, Key::new("user78").fingerprint(secret));
    /// ```
    pub fn fingerprint(&self, secret: &FingerprintSecret) -> String {
        secret.fingerprint(self.as_bytes())
    }

    /// Whether the parts were too long and the key is their digest.
    pub fn is_digest(&self) -> bool {
        self.as_bytes().first() == Some(&DIGEST_TAG)
    }
}

/// Builds a [`Key`] one part at a time; see [`Key::builder`]. Short keys are encoded in place
/// (no allocation until [`build`](KeyBuilder::build)); once the encoding would pass 128 bytes the
/// builder switches to hashing every part.
#[derive(Debug, Clone, Default)]
pub struct KeyBuilder {
    /// The raw encoding so far: each part as one length byte, then its bytes.
    raw: SmallVec<[u8; 64]>,
    /// Set once the raw encoding would grow past [`MAX_RAW_LEN`]: every part hashed so far.
    digest: Option<Sha256>,
}

impl KeyBuilder {
    /// Appends a part.
    pub fn part(&mut self, part: impl AsRef<[u8]>) -> &mut Self {
        let part = part.as_ref();
        if self.digest.is_none() && self.raw.len() + 1 + part.len() > MAX_RAW_LEN {
            let mut hasher = Sha256::new();
            for earlier in raw_parts(&self.raw) {
                hash_part(&mut hasher, earlier);
            }
            self.digest = Some(hasher);
        }
        match &mut self.digest {
            Some(hasher) => hash_part(hasher, part),
            None => {
                // Below MAX_RAW_LEN (< 0x80), so the length fits in one byte.
                self.raw.push(u8::try_from(part.len()).unwrap_or(u8::MAX));
                self.raw.extend_from_slice(part);
            }
        }
        self
    }

    /// The key made of the parts appended so far.
    pub fn build(&self) -> Key {
        match &self.digest {
            None => Key::from_encoding(&self.raw),
            Some(hasher) => {
                let mut bytes = [DIGEST_TAG; 33];
                bytes[1..].copy_from_slice(&hasher.clone().finalize());
                Key::from_encoding(&bytes)
            }
        }
    }
}

fn hash_part(hasher: &mut Sha256, part: &[u8]) {
    hasher.update((part.len() as u64).to_le_bytes());
    hasher.update(part);
}

/// The parts of a raw encoding.
fn raw_parts(mut raw: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::from_fn(move || {
        let (len, rest) = raw.split_first()?;
        let (part, rest) = rest.split_at(usize::from(*len).min(rest.len()));
        raw = rest;
        Some(part)
    })
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key(")?;
        for byte in self.as_bytes() {
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
    fn part_boundaries_matter_in_digests_too() {
        let (a, b) = (vec![b'a'; 60], vec![b'b'; 60]);
        let three = Key::from_parts(&[&a, &b, &b]);
        let joined: Vec<u8> = b.iter().chain(&b).copied().collect();
        let two = Key::from_parts(&[&a, &joined]);
        assert!(three.is_digest() && two.is_digest());
        assert_ne!(three, two);
        let mut builder = Key::builder();
        builder.part(&a).part(&b).part(&b);
        assert_eq!(builder.build(), three, "the builder and from_parts agree");
    }

    #[test]
    fn short_keys_and_digests_are_held_in_place() {
        assert!(std::mem::size_of::<Key>() <= 40);
        let short = Key::new("account-4821");
        assert!(matches!(short.0, Repr::Inline { .. }));
        let digest = Key::new(vec![b'x'; 1_000]);
        assert!(matches!(digest.0, Repr::Inline { .. }));
        let long = Key::new(vec![b'y'; 100]);
        assert!(matches!(long.0, Repr::Shared(_)));
        assert_eq!(long.as_bytes().len(), 101);
        assert_eq!(long.clone(), long);
        assert!(short < Key::new("account-4822"));
    }

    #[test]
    fn part_boundaries_matter() {
        assert_ne!(Key::new(""), Key::global());
        assert_ne!(Key::from_parts(&[b"a".as_slice(), b""]), Key::new("a"));
    }
}
