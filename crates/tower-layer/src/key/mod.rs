//! Who to count: a [`KeyExtractor`] reads a request's parts and names the caller a rule counts.
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
//! ([`MissingKey`](crate::MissingKey)); by default the rule is skipped for that request, and
//! the first skip of each rule is logged at `warn`.
//!
//! **A key that cannot be found because of how the service is deployed is not missing.** An IP
//! rule on a request with no peer address (the app is not served with
//! `into_make_service_with_connect_info`, or the facade lacks the `axum` feature and nothing
//! inserts a [`PeerAddr`]) would otherwise skip every request and limit nothing. Such a request
//! is answered `500` and the cause is logged at `error` (at most once a minute per rule), unless
//! the rule opts into skipping with [`MissingKey::SkipAlways`](crate::MissingKey::SkipAlways).
//! Extractors say so through [`KeyExtractor::misconfiguration`].

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
/// use tollgate_tower::key::{KeyBuilder, KeyExtractor};
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
}

impl<A: KeyExtractor, B: KeyExtractor> KeyExtractor for (A, B) {
    fn extract(&self, request: &Parts, key: &mut KeyBuilder) -> bool {
        self.0.extract(request, key) && self.1.extract(request, key)
    }

    fn misconfiguration(&self, request: &Parts) -> Option<&'static str> {
        (self.0.misconfiguration(request)).or_else(|| self.1.misconfiguration(request))
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
}

impl<K: KeyExtractor + ?Sized> KeyExtractor for std::sync::Arc<K> {
    fn extract(&self, request: &Parts, key: &mut KeyBuilder) -> bool {
        (**self).extract(request, key)
    }

    fn misconfiguration(&self, request: &Parts) -> Option<&'static str> {
        (**self).misconfiguration(request)
    }
}

impl<K: KeyExtractor + ?Sized> KeyExtractor for Box<K> {
    fn extract(&self, request: &Parts, key: &mut KeyBuilder) -> bool {
        (**self).extract(request, key)
    }

    fn misconfiguration(&self, request: &Parts) -> Option<&'static str> {
        (**self).misconfiguration(request)
    }
}

/// A [`KeyExtractor`] from a closure; see [`key_fn`].
#[derive(Clone)]
pub struct KeyFn<F>(F);

impl<F> std::fmt::Debug for KeyFn<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyFn").finish_non_exhaustive()
    }
}

/// Makes a [`KeyExtractor`] of a closure.
///
/// ```
/// use tollgate_tower::key::key_fn;
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
pub fn key_fn<F>(extract: F) -> KeyFn<F>
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
