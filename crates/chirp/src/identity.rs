//! Stand-in identity, obvious on purpose: `Authorization: Bearer <account>` names the signed-in
//! account (no password, no token check). `X-Device-Id` and `X-Api-Key` are read by the rules
//! themselves; client addresses come from `X-Forwarded-For` only through the trusted proxies
//! the rule file names.

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;

/// The signed-in account, as real authentication would insert it.
#[derive(Debug, Clone)]
pub struct Account(pub String);

/// Inserts the [`Account`] a bearer header names.
pub(crate) async fn authenticate(mut request: Request, next: Next) -> Response {
    let account = request
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|account| !account.is_empty() && account.len() <= 128)
        .map(str::to_owned);
    if let Some(account) = account {
        request.extensions_mut().insert(Account(account));
    }
    next.run(request).await
}

/// The signed-in account, required: a request without one is answered `401` (the per-account
/// limits would otherwise have no one to count).
pub(crate) struct SignedIn;

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for SignedIn {
    type Rejection = (axum::http::StatusCode, &'static str);

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _state: &S,
    ) -> Result<Self, Self::Rejection> {
        parts.extensions.get::<Account>().map(|_| SignedIn).ok_or((
            axum::http::StatusCode::UNAUTHORIZED,
            "sign in: send `Authorization: Bearer <account>`\n",
        ))
    }
}
