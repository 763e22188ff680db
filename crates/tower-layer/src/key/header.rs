//! A header's value as the key: an API key, a device id.

use http::HeaderName;
use http::request::Parts;

use super::{KeyBuilder, KeyExtractor};

/// Counts by the value of one header (an API key, a device id the app sends).
///
/// The value is used as it is, byte for byte, after trimming surrounding whitespace. A missing,
/// empty, repeated or over-long value (longer than [`max_len`](HeaderKey::max_len), default 256
/// bytes) counts as a missing key, so a client cannot make the store keep huge keys, and cannot
/// pick which of two values is counted.
///
/// ```
/// use tollgate_tower::key::HeaderKey;
/// let api_key = HeaderKey::new(http::HeaderName::from_static("x-api-key")).max_len(64);
/// # let _ = api_key;
/// ```
#[derive(Debug, Clone)]
pub struct HeaderKey {
    name: HeaderName,
    max_len: usize,
}

impl HeaderKey {
    /// The default longest header value counted; longer values count as missing.
    pub const DEFAULT_MAX_LEN: usize = 256;

    /// Counts by header `name`.
    pub fn new(name: HeaderName) -> Self {
        HeaderKey {
            name,
            max_len: HeaderKey::DEFAULT_MAX_LEN,
        }
    }

    /// The longest value counted (longer values count as missing).
    #[must_use]
    pub fn max_len(mut self, max_len: usize) -> Self {
        self.max_len = max_len;
        self
    }
}

impl KeyExtractor for HeaderKey {
    fn extract(&self, request: &Parts, key: &mut KeyBuilder) -> bool {
        let mut values = request.headers.get_all(&self.name).iter();
        let (Some(value), None) = (values.next(), values.next()) else {
            return false;
        };
        let value = value.as_bytes().trim_ascii();
        if value.is_empty() || value.len() > self.max_len {
            return false;
        }
        key.part(value);
        true
    }
}
