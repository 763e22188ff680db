//! Chirp's challenge: what a request that looks scripted is answered with instead of a plain
//! refusal — `403` and a problem body asking for a captcha, naming no limit, so a real person
//! can go on and a script learns nothing about where the limits are.

use axum::body::Bytes;
use axum::http::{HeaderValue, Response, StatusCode, header};

/// The challenge's problem body.
const BODY: &str = r#"{"type":"https://chirp.example/problems/challenge","title":"Please complete the challenge","status":403,"challenge":"captcha"}"#;

/// The challenge response: `403`, `application/problem+json`, and no `RateLimit` fields.
///
/// ```
/// let challenge = chirp::challenge();
/// assert_eq!(challenge.status(), 403);
/// assert!(std::str::from_utf8(challenge.body()).expect("text").contains("captcha"));
/// ```
pub fn challenge() -> Response<Bytes> {
    let mut response = Response::new(Bytes::from_static(BODY.as_bytes()));
    *response.status_mut() = StatusCode::FORBIDDEN;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    response
}
