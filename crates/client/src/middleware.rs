//! The reqwest side (feature `reqwest`): [`RetryAfterMiddleware`] for `reqwest-middleware`.

use http::Extensions;
use reqwest::{Request, Response};
use reqwest_middleware::{Middleware, Next, Result};

use crate::RetryPolicy;
use crate::attempts::{After, Attempts, host_key};

/// The behaviour of [`RetryAfterLayer`](crate::RetryAfterLayer) as a `reqwest-middleware`
/// middleware: waits as the server asks on `429` and `503`, with bounded jitter, a cap, the
/// shared per-host cool-down and the retry budget of its [`RetryPolicy`]. As the layer, a
/// request whose body is over [`RetryPolicy::max_body`] (64 KiB by default), or a stream whose
/// size is not known up front, is sent once and never kept for a retry.
///
/// ```
/// use tollgate_client::{RetryAfterMiddleware, RetryPolicy};
///
/// let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
///     .with(RetryAfterMiddleware::new(RetryPolicy::default()))
///     .build();
/// # let _ = client;
/// ```
#[derive(Debug, Clone, Default)]
pub struct RetryAfterMiddleware {
    policy: RetryPolicy,
}

impl RetryAfterMiddleware {
    /// A middleware following `policy`.
    pub fn new(policy: RetryPolicy) -> Self {
        RetryAfterMiddleware { policy }
    }
}

#[async_trait::async_trait]
impl Middleware for RetryAfterMiddleware {
    async fn handle(
        &self,
        request: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> Result<Response> {
        let url = request.url();
        let host = host_key(
            Some(url.scheme()),
            url.host_str(),
            url.port_or_known_default(),
        );
        let mut attempts = Attempts::new(&self.policy, request.method(), host, url.path());
        attempts
            .wait_to_send()
            .await
            .map_err(reqwest_middleware::Error::middleware)?;
        let repeatable = attempts.may_repeat(request.headers())
            && request.body().is_none_or(|body| {
                // A stream has no bytes up front: never buffered for a retry.
                body.as_bytes()
                    .is_some_and(|bytes| bytes.len() <= self.policy.max_body)
            });
        let mut request = request;
        loop {
            let again = repeatable.then(|| request.try_clone()).flatten();
            let response = next.clone().run(request, extensions).await?;
            let status = response.status();
            match (
                attempts.after(status, response.headers(), again.is_some()),
                again,
            ) {
                (After::Retry(wait), Some(copy)) => {
                    drop(response);
                    attempts.sleep(wait).await;
                    request = copy;
                }
                _ => return Ok(response),
            }
        }
    }
}
