//! Who a tollgate rate limit counts: a [`KeyExtractor`] reads a request's parts and names the
//! caller a rule counts, and [`client_ip`] finds the client's address safely behind proxies.
//! tollgate-tower's rules take these extractors and re-export this crate as
//! `tollgate_tower::key`; nothing here depends on tower, so another server can use them too.
//!
//! | extractor | counts | missing when |
//! |---|---|---|
//! | [`PeerIp`] | the TCP peer's address, grouped by prefix | never (no peer address is a misconfiguration) |
//! | [`ClientIp`] | the client behind trusted proxies, grouped by prefix | never (as `PeerIp`) |
//! | [`HeaderKey`] | a header's value (API key, device id, token); long values digested | header absent or empty |
//! | [`ExtensionKey`] | a typed request extension (the account auth middleware inserted) | extension absent |
//! | [`Endpoint`] | the method and route pattern | never |
//! | [`Global`] | everyone together (a global cap) | never |
//! | `(A, B)`, `(A, B, C)` | combinations, e.g. account + endpoint, IP block + route | any part missing |
//! | [`key_fn`] | whatever a closure says | the closure says so |
//!
//! What a rule does when its key is missing is the rule's choice
//! (tollgate-tower's `MissingKey`); by default the rule is skipped for that request, and
//! the first skip of each rule is logged at `warn`.
//!
//! **A key that cannot be found because of how the service is deployed is not missing.** An IP
//! rule on a request with no peer address (the app is not served with
//! `into_make_service_with_connect_info`, or the facade lacks the `axum` feature and nothing
//! inserts a [`PeerAddr`]) would otherwise skip every request and limit nothing. Such a request
//! is answered `500` and the cause is logged at `error` (at most once a minute per rule), unless
//! the rule opts into skipping with `MissingKey::SkipAlways`.
//! Extractors say so through [`KeyExtractor::misconfiguration`].
//!
//! The guide's chapter *Who to count* (`docs/guide/src/keys.md`) in the repository shows it at
//! work, task by task.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod client_ip;
mod endpoint;
mod extension;
mod global;
mod header;
mod ip;

use http::request::Parts;
pub use tollgate_core::KeyBuilder;

pub use self::endpoint::{Endpoint, MatchedPattern};
pub use self::extension::ExtensionKey;
pub use self::global::Global;
pub use self::header::HeaderKey;
pub use self::ip::{ClientIp, PeerAddr, PeerIp, peer_addr};

/// Names the caller a rule counts, from the request's parts.
///
/// `extract` appends one or more parts to `key` and answers `true`, or answers `false` when the
/// request has no such key (an anonymous caller for an account rule). Extractors must not panic
/// on any input and should bound what they copy from the request.
///
/// ```
/// use http::request::Parts;
/// use tollgate_key::{KeyBuilder, KeyExtractor};
///
/// /// Counts by the `tenant` query parameter.
/// struct Tenant;
///
/// impl KeyExtractor for Tenant {
///     fn extract(&self, request: &Parts, key: &mut KeyBuilder) -> bool {
///         let query = request.uri.query().unwrap_or("");
///         match query.split('&').find_map(|pair| pair.strip_prefix("tenant=")) {
///             Some(tenant) if !tenant.is_empty() && tenant.len() <= 64 => {
///                 key.part(tenant);
///                 true
///             }
///             _ => false,
///         }
///     }
/// }
/// ```
pub trait KeyExtractor: Send + Sync + 'static {
    /// Appends this extractor's parts to `key`; `false` when the request has no such key.
    fn extract(&self, request: &Parts, key: &mut KeyBuilder) -> bool;

    /// After `extract` answered `false`: why, when the cause is the deployment rather than the
    /// request — a message naming the fix, such as the IP extractors' "no peer address on the
    /// request: serve the app with ...". `None` (the default) means the request simply has no
    /// such key. The layer answers a misconfigured request `500` and logs the message.
    fn misconfiguration(&self, request: &Parts) -> Option<&'static str> {
        let _ = request;
        None
    }

    /// Appends the parts this extractor would for a caller named by hand rather than by a
    /// request — an operator resetting `2001:db8::1` — taking one value per part from `values`
    /// (the IP extractors group the address as they group requests', so the reset reaches the
    /// caller's whole /64; [`Global`] takes none). An error when the values do not name such a
    /// caller, and (the default) when this extractor cannot build a key from values at all:
    /// extension and closure keys, which only code can name.
    fn key_from_values(
        &self,
        values: &mut dyn Iterator<Item = &str>,
        key: &mut KeyBuilder,
    ) -> Result<(), KeyValueError> {
        let _ = (values, key);
        Err(KeyValueError::Unsupported)
    }
}

/// Why [`KeyExtractor::key_from_values`] could not name a caller.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyValueError {
    /// This kind of key is built by code from requests only.
    Unsupported,
    /// Fewer values than the key has parts.
    Missing(&'static str),
    /// A value that is not what the part counts (`expected` says what is).
    Invalid {
        /// The value given.
        value: String,
        /// What the part needs.
        expected: &'static str,
    },
    /// More values than the key has parts.
    TooMany,
}

impl std::fmt::Display for KeyValueError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyValueError::Unsupported => f.write_str(
                "this rule's key is built by code from requests (an extension or a closure) and cannot be named by value",
            ),
            KeyValueError::Missing(expected) => write!(f, "missing a value: {expected}"),
            KeyValueError::Invalid { value, expected } => {
                write!(f, "{value:?} is not {expected}")
            }
            KeyValueError::TooMany => f.write_str("more values than the rule's key has parts"),
        }
    }
}

impl std::error::Error for KeyValueError {}

/// The next of `values`, or [`KeyValueError::Missing`] naming what it should be.
pub(crate) fn next_value<'v>(
    values: &mut dyn Iterator<Item = &'v str>,
    expected: &'static str,
) -> Result<&'v str, KeyValueError> {
    values.next().ok_or(KeyValueError::Missing(expected))
}

/// Builds `extractor`'s key for a caller named by `values` (one per part, all used): what an
/// operator's reset counts against ([`KeyExtractor::key_from_values`]).
///
/// ```
/// use tollgate_key::{Endpoint, HeaderKey, key_of_values};
///
/// let per_key_and_route = (HeaderKey::new(http::HeaderName::from_static("x-api-key")), Endpoint);
/// let key = key_of_values(&per_key_and_route, &["k-123", "GET /search"])?;
/// assert!(key_of_values(&per_key_and_route, &["k-123"]).is_err()); // a part is missing
/// # let _ = key;
/// # Ok::<(), tollgate_key::KeyValueError>(())
/// ```
pub fn key_of_values(
    extractor: &dyn KeyExtractor,
    values: &[&str],
) -> Result<tollgate_core::Key, KeyValueError> {
    let mut key = KeyBuilder::default();
    let mut rest = values.iter().copied();
    extractor.key_from_values(&mut rest, &mut key)?;
    match rest.next() {
        Some(_) => Err(KeyValueError::TooMany),
        None => Ok(key.build()),
    }
}

impl<A: KeyExtractor, B: KeyExtractor> KeyExtractor for (A, B) {
    fn extract(&self, request: &Parts, key: &mut KeyBuilder) -> bool {
        self.0.extract(request, key) && self.1.extract(request, key)
    }

    fn misconfiguration(&self, request: &Parts) -> Option<&'static str> {
        (self.0.misconfiguration(request)).or_else(|| self.1.misconfiguration(request))
    }

    fn key_from_values(
        &self,
        values: &mut dyn Iterator<Item = &str>,
        key: &mut KeyBuilder,
    ) -> Result<(), KeyValueError> {
        self.0.key_from_values(values, key)?;
        self.1.key_from_values(values, key)
    }
}

impl<A: KeyExtractor, B: KeyExtractor, C: KeyExtractor> KeyExtractor for (A, B, C) {
    fn extract(&self, request: &Parts, key: &mut KeyBuilder) -> bool {
        self.0.extract(request, key) && self.1.extract(request, key) && self.2.extract(request, key)
    }

    fn misconfiguration(&self, request: &Parts) -> Option<&'static str> {
        (self.0.misconfiguration(request))
            .or_else(|| self.1.misconfiguration(request))
            .or_else(|| self.2.misconfiguration(request))
    }

    fn key_from_values(
        &self,
        values: &mut dyn Iterator<Item = &str>,
        key: &mut KeyBuilder,
    ) -> Result<(), KeyValueError> {
        self.0.key_from_values(values, key)?;
        self.1.key_from_values(values, key)?;
        self.2.key_from_values(values, key)
    }
}

impl<K: KeyExtractor + ?Sized> KeyExtractor for std::sync::Arc<K> {
    fn extract(&self, request: &Parts, key: &mut KeyBuilder) -> bool {
        (**self).extract(request, key)
    }

    fn misconfiguration(&self, request: &Parts) -> Option<&'static str> {
        (**self).misconfiguration(request)
    }

    fn key_from_values(
        &self,
        values: &mut dyn Iterator<Item = &str>,
        key: &mut KeyBuilder,
    ) -> Result<(), KeyValueError> {
        (**self).key_from_values(values, key)
    }
}

impl<K: KeyExtractor + ?Sized> KeyExtractor for Box<K> {
    fn extract(&self, request: &Parts, key: &mut KeyBuilder) -> bool {
        (**self).extract(request, key)
    }

    fn misconfiguration(&self, request: &Parts) -> Option<&'static str> {
        (**self).misconfiguration(request)
    }

    fn key_from_values(
        &self,
        values: &mut dyn Iterator<Item = &str>,
        key: &mut KeyBuilder,
    ) -> Result<(), KeyValueError> {
        (**self).key_from_values(values, key)
    }
}

/// `key` as a shared extractor, for a rule to keep: an extractor already shared (an
/// `Arc<dyn KeyExtractor>`, as a rule file's named extractors are) is kept as it is rather than
/// wrapped a second time, so the request path follows one pointer, not two.
///
/// ```
/// use std::sync::Arc;
/// use tollgate_key::{Global, KeyExtractor, shared};
///
/// let once: Arc<dyn KeyExtractor> = Arc::new(Global);
/// assert!(Arc::ptr_eq(&shared(Arc::clone(&once)), &once));
/// ```
pub fn shared(key: impl KeyExtractor) -> std::sync::Arc<dyn KeyExtractor> {
    let mut slot = Some(key);
    let any: &mut dyn std::any::Any = &mut slot;
    match any.downcast_mut::<Option<std::sync::Arc<dyn KeyExtractor>>>() {
        Some(already) => already.take().expect("the slot was just filled"),
        None => std::sync::Arc::new(slot.take().expect("the slot was just filled")),
    }
}

/// A [`KeyExtractor`] from a closure; see [`key_fn`].
#[derive(Clone)]
struct KeyFn<F>(F);

impl<F> std::fmt::Debug for KeyFn<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyFn").finish_non_exhaustive()
    }
}

/// Makes a [`KeyExtractor`] of a closure.
///
/// ```
/// use tollgate_key::key_fn;
/// // Count by the first path segment (a tenant in `/{tenant}/...`).
/// let tenant = key_fn(|request, key| match request.uri.path().split('/').nth(1) {
///     Some(tenant) if !tenant.is_empty() => {
///         key.part(tenant);
///         true
///     }
///     _ => false,
/// });
/// # let _ = tenant;
/// ```
pub fn key_fn<F>(extract: F) -> impl KeyExtractor
where
    F: Fn(&Parts, &mut KeyBuilder) -> bool + Send + Sync + 'static,
{
    KeyFn(extract)
}

impl<F> KeyExtractor for KeyFn<F>
where
    F: Fn(&Parts, &mut KeyBuilder) -> bool + Send + Sync + 'static,
{
    fn extract(&self, request: &Parts, key: &mut KeyBuilder) -> bool {
        (self.0)(request, key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closure_names_the_caller_it_finds_and_skips_a_request_without_one() {
        let tenant = key_fn(|request, key| match request.uri.path().split('/').nth(1) {
            Some(tenant) if !tenant.is_empty() => {
                key.part(tenant);
                true
            }
            _ => false,
        });
        let parts = |path: &str| {
            http::Request::builder()
                .uri(path)
                .body(())
                .expect("a request")
                .into_parts()
                .0
        };
        let mut acme = KeyBuilder::default();
        assert!(tenant.extract(&parts("/acme/orders"), &mut acme));
        assert_eq!(acme.build(), tollgate_core::Key::new("acme"));
        assert!(!tenant.extract(&parts("/"), &mut KeyBuilder::default()));
    }
}
