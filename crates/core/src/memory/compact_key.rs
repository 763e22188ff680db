//! A key stored in 16 bytes: inline when short, one heap pointer when long.

use std::num::NonZeroU8;

use super::thin_bytes::ThinBytes;

const INLINE_CAPACITY: usize = 15;

/// The bytes of a [`Key`](crate::Key) as the in-memory store keeps them. Most keys (an account
/// id, an IP block, an API key prefix) fit in 15 bytes and cost no allocation; longer ones (at
/// most 128 bytes, see `Key`) take one allocation behind a thin pointer.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum CompactKey {
    /// `len_plus_one - 1` bytes of `bytes` are the key (the `NonZeroU8` lets the enum use its
    /// zero as the tag, keeping the whole key at 16 bytes).
    Inline {
        len_plus_one: NonZeroU8,
        bytes: [u8; INLINE_CAPACITY],
    },
    /// A long key.
    Boxed(ThinBytes),
}

/// A key being looked up, prepared once so each candidate is compared without a `memcmp` call:
/// short keys compare as one fixed-size array.
pub(crate) struct KeyProbe<'k> {
    inline: Option<(NonZeroU8, [u8; INLINE_CAPACITY])>,
    bytes: &'k [u8],
}

impl<'k> KeyProbe<'k> {
    #[inline]
    pub(crate) fn new(bytes: &'k [u8]) -> Self {
        KeyProbe {
            inline: inline_form(bytes),
            bytes,
        }
    }
}

#[inline]
fn inline_form(key: &[u8]) -> Option<(NonZeroU8, [u8; INLINE_CAPACITY])> {
    if key.len() > INLINE_CAPACITY {
        return None;
    }
    let mut bytes = [0; INLINE_CAPACITY];
    bytes[..key.len()].copy_from_slice(key);
    let len_plus_one = u8::try_from(key.len() + 1).ok().and_then(NonZeroU8::new)?;
    Some((len_plus_one, bytes))
}

impl CompactKey {
    /// `key`: a [`Key`](crate::Key)'s encoding, at most 128 bytes.
    pub(crate) fn new(key: &[u8]) -> Self {
        match inline_form(key) {
            Some((len_plus_one, bytes)) => CompactKey::Inline {
                len_plus_one,
                bytes,
            },
            None => CompactKey::Boxed(
                ThinBytes::new(key).expect("a `Key`'s encoding is at most 128 bytes"),
            ),
        }
    }

    /// Whether this is the probed key.
    #[inline]
    pub(crate) fn matches(&self, probe: &KeyProbe<'_>) -> bool {
        match (self, &probe.inline) {
            (
                CompactKey::Inline {
                    len_plus_one,
                    bytes,
                },
                Some((probe_len, probe_bytes)),
            ) => len_plus_one == probe_len && bytes == probe_bytes,
            (CompactKey::Boxed(bytes), None) => bytes.as_bytes() == probe.bytes,
            _ => false,
        }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        match self {
            CompactKey::Inline {
                len_plus_one,
                bytes,
            } => &bytes[..usize::from(len_plus_one.get() - 1)],
            CompactKey::Boxed(bytes) => bytes.as_bytes(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compact_key_is_sixteen_bytes() {
        assert_eq!(std::mem::size_of::<CompactKey>(), 16);
    }

    #[test]
    fn round_trips_short_and_long_keys() {
        for len in [0, 1, 14, 15, 16, 33, 128] {
            let key: Vec<u8> = (0..len).map(|i| i as u8).collect();
            assert_eq!(CompactKey::new(&key).as_bytes(), &key[..]);
        }
    }
}
