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
pub(crate) enum Before {
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
    host: String,
    method: Method,
    path: String,
    retries: u32,
}

impl<'a> Attempts<'a> {
    /// The attempts of a request with `method` to `uri`, counted in the budget as one request.
    pub(crate) fn new(policy: &'a RetryPolicy, method: &Method, uri: &Uri) -> Self {
        policy.budget.deposit();
        Attempts {
            policy,
            host: uri
                .authority()
                .map_or_else(String::new, |a| a.as_str().to_ascii_lowercase()),
            method: method.clone(),
            path: uri.path().to_owned(),
            retries: 0,
        }
    }

    /// Whether the request may be sent again, as far as its method and headers go.
    pub(crate) fn may_repeat(&self, headers: &HeaderMap) -> bool {
        self.policy
            .may_repeat(&self.method, headers.contains_key("idempotency-key"))
    }

    /// Before the first send: a wait for the host's or route's cool-down, if one is in force.
    pub(crate) fn before(&self) -> Before {
        let now = Instant::now();
        let table = &self.policy.cool_downs;
        let Some(until) = table.until(&self.host, self.method.as_str(), &self.path, now) else {
            return Before::Go;
        };
        let left = until - now;
        match self.policy.when_cooling {
            WhenCooling::FailFast => Before::Fail(CoolingDown::new(self.host.clone(), left)),
            _ => {
                let wait = self.policy.jitter.apply(left, fastrand::f64());
                tracing::debug!(
                    target: "tollgate::client",
                    host = %self.host,
                    wait_ms = wait.as_millis() as u64,
                    "the host is cooling down: waiting before sending"
                );
                count("tollgate_client_cool_down_waits_total", None);
                Before::Wait(wait)
            }
        }
    }

    /// Before a retry, once its own wait is over: how much longer, if the host's or route's
    /// cool-down now ends later (another request through this client was told to wait while
    /// this one slept), with jitter.
    pub(crate) fn cooling_left(&self) -> Option<Duration> {
        let now = Instant::now();
        let table = &self.policy.cool_downs;
        let until = table.until(&self.host, self.method.as_str(), &self.path, now)?;
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
        if let Some(reset) = exhausted_for(headers).filter(|reset| !reset.is_zero()) {
            if reset <= policy.max_wait {
                let table = &policy.cool_downs;
                table.hold_route(&self.host, self.method.as_str(), &self.path, now + reset);
            }
        }
        if !policy.retries(status) {
            return After::Done;
        }
        let hint = server_wait(headers, SystemTime::now());
        if let Some(hint) = hint {
            if hint.wait > policy.max_wait {
                return self.give_up(status, GaveUp::TooLong);
            }
            if hint.source == HintSource::RetryAfter {
                policy.cool_downs.hold_host(&self.host, now + hint.wait);
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
            Some(hint) => policy.jitter.apply(hint.wait, fastrand::f64()),
            None => policy.backoff.wait(self.retries, fastrand::f64()),
        };
        self.retries += 1;
        tracing::info!(
            target: "tollgate::client",
            host = %self.host,
            status = status.as_u16(),
            server_wait_ms = hint.map(|hint| hint.wait.as_millis() as u64),
            wait_ms = wait.as_millis() as u64,
            retry = self.retries,
            "waiting before a retry"
        );
        count("tollgate_client_retries_total", Some(status));
        After::Retry(wait)
    }

    fn give_up(&self, status: StatusCode, why: GaveUp) -> After {
        tracing::debug!(
            target: "tollgate::client",
            host = %self.host,
            status = status.as_u16(),
            reason = why.as_str(),
            "not retried: the answer is returned as it is"
        );
        #[cfg(feature = "metrics")]
        metrics::counter!("tollgate_client_gave_up_total", "reason" => why.as_str()).increment(1);
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
