//! A header's value as the key: an API key, a device id, a bearer token.

use http::HeaderName;
use http::request::Parts;

use super::{KeyBuilder, KeyExtractor, KeyValueError, next_value};

/// Counts by the value of one header (an API key, a device id the app sends, a bearer token).
///
/// The value is used as it is, byte for byte, after trimming surrounding whitespace; a gRPC
/// binary metadata value (a header whose name ends in `-bin`) is base64, and counts as the bytes
/// it encodes, so padded and unpadded forms of one value are one key (a value that is not valid
/// base64 counts as its text, apart from every decoded value). When the header is sent more than once, the **first** value counts (the one `HeaderMap::get`, and so
/// most handlers, read). Only a missing or empty header counts as a missing key.
///
/// **Long values stay distinct.** A value of up to [`max_len`](HeaderKey::max_len) bytes
/// (default 8 KiB, more than any real JWT) is its own key; the store never keeps it whole, since
/// a [`Key`](tollgate_core::Key) longer than 128 bytes is kept as its SHA-256 digest. So two
/// users whose tokens are 400-byte JWTs never share a count.
///
/// **Past the cap, one shared key.** A value longer than `max_len` is not read at all: every
/// such value counts against one shared "over-long" key. A client can neither make the
/// limiter hash megabytes per request nor escape the rule by sending a huge value (a missing key
/// would, by default, skip the rule); the price is that senders of over-long values limit each
/// other.
///
/// ```
/// use tollgate_key::HeaderKey;
/// let api_key = HeaderKey::new(http::HeaderName::from_static("x-api-key")).max_len(64);
/// # let _ = api_key;
/// ```
#[derive(Debug, Clone)]
pub struct HeaderKey {
    name: HeaderName,
    max_len: usize,
    /// A gRPC binary metadata header (`-bin`): base64 of the bytes that count.
    binary: bool,
}

impl HeaderKey {
    /// The default longest header value counted as itself: 8 KiB.
    pub(crate) const DEFAULT_MAX_LEN: usize = 8 * 1024;

    /// Counts by header `name`.
    pub fn new(name: HeaderName) -> Self {
        HeaderKey {
            binary: name.as_str().ends_with("-bin"),
            name,
            max_len: HeaderKey::DEFAULT_MAX_LEN,
        }
    }

    /// The longest value counted as itself; longer values share one "over-long" key.
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
        self.append(value.as_bytes(), key)
    }

    fn key_from_values(
        &self,
        values: &mut dyn Iterator<Item = &str>,
        key: &mut KeyBuilder,
    ) -> Result<(), KeyValueError> {
        const EXPECTED: &str = "a header value";
        let value = next_value(values, EXPECTED)?;
        if self.append(value.as_bytes(), key) {
            Ok(())
        } else {
            Err(KeyValueError::Invalid {
                value: value.to_owned(),
                expected: EXPECTED,
            })
        }
    }
}

impl HeaderKey {
    /// Appends the part a header value counts as; `false` for an empty value.
    fn append(&self, value: &[u8], key: &mut KeyBuilder) -> bool {
        let value = value.trim_ascii();
        if value.is_empty() {
            return false;
        }
        if value.len() > self.max_len {
            // A marker part no real value can equal: parts carry their length, and this one is
            // followed by a second part.
            key.part(b"over-long").part(b"");
        } else if !self.binary {
            key.part(value);
        } else {
            match decode_binary(value) {
                Some(bytes) => key.part(&bytes),
                // Not base64: its text, marked so it never shares a key with decoded bytes.
                None => key.part(b"not-base64").part(value),
            };
        }
        true
    }
}

/// The bytes a gRPC binary metadata value encodes (base64, padded or not).
fn decode_binary(value: &[u8]) -> Option<Vec<u8>> {
    use base64::Engine;
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const PADDED_OR_NOT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    PADDED_OR_NOT.decode(value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key_of(extractor: &HeaderKey, name: &str, value: &str) -> tollgate_core::Key {
        let (parts, ()) = http::Request::builder()
            .header(name, value)
            .body(())
            .expect("a request")
            .into_parts();
        let mut key = KeyBuilder::default();
        assert!(extractor.extract(&parts, &mut key));
        key.build()
    }

    /// gRPC binary metadata counts as the bytes it encodes: padded and unpadded base64 of one
    /// value are one key; different bytes are different keys; text that is not base64 still
    /// counts (as itself).
    #[test]
    fn binary_metadata_counts_as_its_bytes() {
        let name = "x-device-bin";
        let device = HeaderKey::new(HeaderName::from_static("x-device-bin"));
        assert_eq!(key_of(&device, name, "AAEC"), key_of(&device, name, "AAEC"));
        assert_eq!(key_of(&device, name, "AAE="), key_of(&device, name, "AAE"));
        assert_ne!(key_of(&device, name, "AAE="), key_of(&device, name, "AAI="));
        assert_eq!(
            key_of(&device, name, "AAE="),
            tollgate_core::Key::builder().part([0u8, 1]).build()
        );
        assert_eq!(
            key_of(&device, name, "not base64!"),
            tollgate_core::Key::builder()
                .part("not-base64")
                .part("not base64!")
                .build()
        );
        // Text that is not base64 never shares a key with the bytes it spells.
        assert_ne!(
            key_of(&device, name, "hello!"),
            key_of(&device, name, "aGVsbG8h")
        );
        // A text header is its text, base64-looking or not.
        let text = HeaderKey::new(HeaderName::from_static("x-device"));
        assert_eq!(
            key_of(&text, "x-device", "AAE="),
            tollgate_core::Key::builder().part("AAE=").build()
        );
    }
}
