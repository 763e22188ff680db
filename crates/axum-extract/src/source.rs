//! Where the extractors find the [`Tollgate`]: the router's state, or a request extension.

use axum::extract::FromRef;
use http::request::Parts;

use crate::{LimitRejection, Tollgate};

/// Where [`Limited`](crate::Limited), [`Limiter`](crate::Limiter) and [`Tollgate`] (as
/// extractors) find the handle, decided by the router's state type `S`:
///
/// * **An app with state** gives the state a `Tollgate` (`impl FromRef<AppState> for Tollgate`,
///   or axum's `#[derive(FromRef)]` on a field). A router whose state cannot give one does not
///   compile, so a forgotten `Tollgate` is found by the compiler, not by a 500 in production.
/// * **An app without state** (`Router<()>`) adds it as a request extension,
///   `.layer(Extension(tollgate))`; a route that lacks it answers a clear `500` and logs why.
///
/// ```
/// use axum::extract::FromRef;
/// use axum::{Router, routing::post};
/// use tollgate_axum::{Limiter, Tollgate};
/// use tollgate_core::MemoryStore;
///
/// #[derive(Clone)]
/// struct AppState {
///     tollgate: Tollgate,
/// }
///
/// impl FromRef<AppState> for Tollgate {
///     fn from_ref(state: &AppState) -> Tollgate {
///         state.tollgate.clone()
///     }
/// }
///
/// async fn login(_limiter: Limiter) -> &'static str {
///     "welcome"
/// }
///
/// let app: Router = Router::new()
///     .route("/login", post(login))
///     .with_state(AppState { tollgate: Tollgate::new(MemoryStore::new()) });
/// # let _ = app;
/// ```
///
/// The same router with a state that cannot give a `Tollgate` does not compile:
///
/// ```compile_fail
/// use axum::{Router, routing::post};
/// use tollgate_axum::Limiter;
///
/// #[derive(Clone)]
/// struct AppState {
///     database_url: String,
/// }
///
/// async fn login(_limiter: Limiter) -> &'static str {
///     "welcome"
/// }
///
/// let app: Router = Router::new()
///     .route("/login", post(login))
///     .with_state(AppState { database_url: String::new() });
/// ```
pub trait TollgateSource: Send + Sync {
    /// The handle for a request with these parts.
    fn tollgate(&self, parts: &Parts) -> Result<Tollgate, LimitRejection>;
}

/// Apps without state: the `Tollgate` request extension.
impl TollgateSource for () {
    fn tollgate(&self, parts: &Parts) -> Result<Tollgate, LimitRejection> {
        Tollgate::from_parts(parts)
    }
}

/// Apps with state: the state's `Tollgate`.
impl<S> TollgateSource for S
where
    Tollgate: FromRef<S>,
    S: Send + Sync,
{
    fn tollgate(&self, _parts: &Parts) -> Result<Tollgate, LimitRejection> {
        Ok(Tollgate::from_ref(self))
    }
}
