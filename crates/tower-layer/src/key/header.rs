//! A header's value as the key: an API key, a device id.

use http::HeaderName;
use http::request::Parts;

use super::{KeyBuilder, KeyExtractor};

/// Counts by the value of one header (an API key, a device id the app sends).
///
/// The value is used as it is, byte for byte, after trimming surrounding whitespace. When the
/// header is sent more than once, the **first** value counts (the one `HeaderMap::get`, and so
/// most handlers, read). A value longer than [`max_len`](HeaderKey::max_len) (default 256 bytes)
/// is not stored: every over-long value counts against one shared "over-long" key, so a client
/// can neither make the store keep huge keys nor escape the rule by sending one. Only a missing
/// or empty header counts as a missing key.
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
        let Some(value) = request.headers.get(&self.name) else {
            return false;
        };
        let value = value.as_bytes().trim_ascii();
        if value.is_empty() {
            return false;
        }
        if value.len() > self.max_len {
            // A marker part no real value can equal: parts carry their length, and this one is
            // followed by a second part.
            key.part(b"over-long").part(b"");
        } else {
            key.part(value);
        }
        true
    }
}
