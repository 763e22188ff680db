//! One request's way through a [`RetryPolicy`]: whether to wait before sending (its host is
//! cooling down), and after each answer whether to send it again and after how long. Both the
//! tower layer and the reqwest middleware follow it, so they behave alike.

use std::time::{Duration, SystemTime};

use http::{HeaderMap, Method, StatusCode, Uri};
use tokio::time::Instant;
use tower::retry::budget::Budget;

use crate::{CoolingDown, HintSource, RetryPolicy, WhenCooling, exhausted_for, server_wait};

/// What to do before sending.
#[derive(Debug)]
enum Before {
    /// Send now.
    Go,
    /// The host or route is cooling down: wait this long first.
    Wait(Duration),
    /// The host or route is cooling down and the policy fails fast.
    Fail(CoolingDown),
}

/// What to do with an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum After {
    /// Return it as it is.
    Done,
    /// Send the request again after this long.
    Retry(Duration),
}

/// Why an answer that could have been retried was returned as it is.
#[derive(Debug, Clone, Copy)]
enum GaveUp {
    TooLong,
    NotRepeatable,
    OutOfAttempts,
    OutOfBudget,
}

impl GaveUp {
    fn as_str(self) -> &'static str {
        match self {
            GaveUp::TooLong => "wait_above_cap",
            GaveUp::NotRepeatable => "not_repeatable",
            GaveUp::OutOfAttempts => "attempts",
            GaveUp::OutOfBudget => "budget",
        }
    }
}

/// One request's attempts.
pub(crate) struct Attempts<'a> {
    policy: &'a RetryPolicy,
    /// The cool-down key: host and port, never userinfo; `None` when the request names no host
    /// (then it neither waits for nor sets a cool-down).
    host: Option<String>,
    method: Method,
    path: String,
    retries: u32,
}

/// `host:port`, lower-cased, the port made explicit from the scheme: `api.example` and
/// `api.example:443` are one host for `https`; userinfo never appears.
pub(crate) fn host_key(
    scheme: Option<&str>,
    host: Option<&str>,
    port: Option<u16>,
) -> Option<String> {
    let host = host.filter(|host| !host.is_empty())?.to_ascii_lowercase();
    let port = port.or(match scheme {
        Some("https" | "wss") => Some(443),
        Some("http" | "ws") => Some(80),
        _ => None,
    });
    Some(match port {
        Some(port) => format!("{host}:{port}"),
        None => host,
    })
}

impl<'a> Attempts<'a> {
    /// The attempts of a request with `method` to `uri` (a relative one: to its `Host`
    /// header's host).
    pub(crate) fn for_uri(
        policy: &'a RetryPolicy,
        method: &Method,
        uri: &Uri,
        headers: &HeaderMap,
    ) -> Self {
        let host = match uri.host() {
            Some(host) => host_key(uri.scheme_str(), Some(host), uri.port_u16()),
            None => headers
                .get(http::header::HOST)
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.parse::<http::uri::Authority>().ok())
                .and_then(|authority| {
                    host_key(Some("http"), Some(authority.host()), authority.port_u16())
                }),
        };
        Attempts::new(policy, method, host, uri.path())
    }

    /// The attempts of a request with `method` to the host `host` (see [`host_key`]) and `path`.
    pub(crate) fn new(
        policy: &'a RetryPolicy,
        method: &Method,
        host: Option<String>,
        path: &str,
    ) -> Self {
        Attempts {
            policy,
            host,
            method: method.clone(),
            path: path.to_owned(),
            retries: 0,
        }
    }

    /// Whether the request may be sent again, as far as its method and headers go.
    pub(crate) fn may_repeat(&self, headers: &HeaderMap) -> bool {
        self.policy
            .may_repeat(&self.method, headers.contains_key("idempotency-key"))
    }

    /// Before the first send: a wait for the host's or route's cool-down, if one is in force.
    /// A request that will be sent counts in the budget as one request.
    fn before(&self) -> Before {
        let now = Instant::now();
        let table = &self.policy.cool_downs;
        let until = self
            .host
            .as_deref()
            .and_then(|host| table.until(host, self.method.as_str(), &self.path, now));
        let Some(until) = until else {
            self.policy.budget.deposit();
            return Before::Go;
        };
        let left = until - now;
        match self.policy.when_cooling {
            WhenCooling::FailFast => {
                let host = self.host.clone().unwrap_or_default();
                Before::Fail(CoolingDown::new(host, left))
            }
            _ => {
                self.policy.budget.deposit();
                let wait = self.policy.jitter.apply(left, fastrand::f64());
                tracing::debug!(
                    target: "tollgate::client",
                    host = self.host.as_deref().unwrap_or_default(),
                    wait_ms = wait.as_millis() as u64,
                    "the host is cooling down: waiting before sending"
                );
                count(crate::metric_names::COOL_DOWN_WAITS, None);
                Before::Wait(wait)
            }
        }
    }

    /// Waits before the first send as [`before`](Self::before) says (re-checking the table
    /// after each wait, since another request may have been told to wait longer meanwhile);
    /// the error when the policy fails fast.
    pub(crate) async fn wait_to_send(&self) -> Result<(), CoolingDown> {
        match self.before() {
            Before::Go => Ok(()),
            Before::Wait(wait) => {
                self.sleep(wait).await;
                Ok(())
            }
            Before::Fail(cooling) => Err(cooling),
        }
    }

    /// Sleeps `wait`, then for as long as the host's or route's cool-down still holds.
    pub(crate) async fn sleep(&self, wait: Duration) {
        tokio::time::sleep(wait).await;
        while let Some(more) = self.cooling_left() {
            tokio::time::sleep(more).await;
        }
    }

    /// Before a retry, once its own wait is over: how much longer, if the host's or route's
    /// cool-down now ends later (another request through this client was told to wait while
    /// this one slept), with jitter.
    fn cooling_left(&self) -> Option<Duration> {
        let now = Instant::now();
        let table = &self.policy.cool_downs;
        let host = self.host.as_deref()?;
        let until = table.until(host, self.method.as_str(), &self.path, now)?;
        Some(self.policy.jitter.apply(until - now, fastrand::f64()))
    }

    /// After an answer with `status` and `headers`: remember what it says about waiting, and
    /// say whether to send again (`repeatable`: the request can be sent again at all).
    pub(crate) fn after(
        &mut self,
        status: StatusCode,
        headers: &HeaderMap,
        repeatable: bool,
    ) -> After {
        let now = Instant::now();
        let policy = self.policy;
        let reset =
            exhausted_for(headers).filter(|reset| !reset.is_zero() && *reset <= policy.max_wait);
        if let (Some(host), Some(until)) =
            (&self.host, reset.and_then(|reset| now.checked_add(reset)))
        {
            policy
                .cool_downs
                .hold_route(host, self.method.as_str(), &self.path, until);
        }
        // A gRPC refusal (trailers-only: HTTP 200) is retried as the status it stands for, and
        // its RetryInfo comes before Retry-After.
        #[cfg(feature = "grpc")]
        let status = crate::grpc::as_http_status(headers).unwrap_or(status);
        if !policy.retries(status) {
            return After::Done;
        }
        #[cfg(feature = "grpc")]
        let hint = crate::grpc::grpc_retry_delay(headers)
            .map(|wait| crate::ServerHint {
                wait,
                source: HintSource::RetryAfter,
            })
            .or_else(|| server_wait(headers, SystemTime::now()));
        #[cfg(not(feature = "grpc"))]
        let hint = server_wait(headers, SystemTime::now());
        if let Some(hint) = hint {
            // Past the cap, or past anything a clock can hold: not waited.
            let Some(until) = now
                .checked_add(hint.wait)
                .filter(|_| hint.wait <= policy.max_wait)
            else {
                return self.give_up(status, GaveUp::TooLong);
            };
            if let (HintSource::RetryAfter, Some(host)) = (hint.source, &self.host) {
                policy.cool_downs.hold_host(host, until);
            }
        }
        if !repeatable {
            return self.give_up(status, GaveUp::NotRepeatable);
        }
        if self.retries >= policy.max_retries {
            return self.give_up(status, GaveUp::OutOfAttempts);
        }
        if !policy.budget.withdraw() {
            return self.give_up(status, GaveUp::OutOfBudget);
        }
        let wait = match hint {
            // "Now" (Retry-After: 0, a date already past, t=0) is never an immediate loop:
            // the backoff's wait, which the server's "now" allows.
            Some(hint) if hint.wait.is_zero() => policy.backoff.wait(self.retries, fastrand::f64()),
            Some(hint) => policy.jitter.apply(hint.wait, fastrand::f64()),
            None => policy.backoff.wait(self.retries, fastrand::f64()),
        };
        self.retries += 1;
        tracing::info!(
            target: "tollgate::client",
            host = self.host.as_deref().unwrap_or_default(),
            status = status.as_u16(),
            server_wait_ms = hint.map(|hint| hint.wait.as_millis() as u64),
            wait_ms = wait.as_millis() as u64,
            retry = self.retries,
            "waiting before a retry"
        );
        count(crate::metric_names::RETRIES, Some(status));
        After::Retry(wait)
    }

    fn give_up(&self, status: StatusCode, why: GaveUp) -> After {
        tracing::debug!(
            target: "tollgate::client",
            host = self.host.as_deref().unwrap_or_default(),
            status = status.as_u16(),
            reason = why.as_str(),
            "not retried: the answer is returned as it is"
        );
        #[cfg(feature = "metrics")]
        metrics::counter!(crate::metric_names::GAVE_UP, "reason" => why.as_str()).increment(1);
        After::Done
    }
}

/// Adds one to the counter `name` (with the status as a label, when given), through the
/// `metrics` facade when the feature is on.
fn count(name: &'static str, status: Option<StatusCode>) {
    #[cfg(feature = "metrics")]
    match status {
        Some(status) => {
            metrics::counter!(name, "status" => status.as_str().to_owned()).increment(1)
        }
        None => metrics::counter!(name).increment(1),
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (name, status);
}
