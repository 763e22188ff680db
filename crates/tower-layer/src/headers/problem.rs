//! RFC 9457 problem details (`application/problem+json`) for the responses the limiter itself
//! sends: 429 when a caller is over its limit, 503 when the limiter cannot decide.

use std::fmt::Write as _;
use std::time::Duration;

use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use tollgate_core::RefusalReason;

use crate::headers::json::push_json_string;
use crate::headers::report::PolicyReport;
use crate::headers::retry_after::retry_after_secs;

/// The media type of a problem details body (RFC 9457 §3).
pub(crate) const PROBLEM_JSON: &str = "application/problem+json";

/// What went wrong, as a problem type: each has a fixed URI, title and status code.
///
/// The URIs are URNs, not links: they identify the problem and are not meant to be fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub(crate) enum ProblemType {
    /// The caller used up a quota; a later retry can succeed (429).
    RateLimited,
    /// The request costs more than the quota allows at once; it can never succeed (429).
    CostExceedsLimit,
    /// The limiter could not decide (its store is unreachable and the rule fails closed) (503).
    LimiterUnavailable,
    /// A rule that needs a key (an API key, an account) found none; the rule chooses the status,
    /// a client error (400 when the status it names is not one).
    MissingKey,
    /// The limiter cannot find a key because of how the service is deployed (an IP rule with
    /// no peer address): the operator's fault, not the caller's (500). The body names no rule
    /// and no cause; the log does.
    Misconfigured,
}

impl ProblemType {
    /// The `type` member: `urn:tollgate:problem:rate-limited`,
    /// `urn:tollgate:problem:cost-exceeds-limit`, `urn:tollgate:problem:limiter-unavailable` or
    /// `urn:tollgate:problem:missing-key` or `urn:tollgate:problem:misconfigured`.
    pub(crate) const fn uri(self) -> &'static str {
        match self {
            ProblemType::RateLimited => "urn:tollgate:problem:rate-limited",
            ProblemType::CostExceedsLimit => "urn:tollgate:problem:cost-exceeds-limit",
            ProblemType::LimiterUnavailable => "urn:tollgate:problem:limiter-unavailable",
            ProblemType::MissingKey => "urn:tollgate:problem:missing-key",
            ProblemType::Misconfigured => "urn:tollgate:problem:misconfigured",
        }
    }

    /// The `title` member: a short summary that is the same for every occurrence.
    pub(crate) const fn title(self) -> &'static str {
        match self {
            ProblemType::RateLimited => "Too many requests",
            ProblemType::CostExceedsLimit => "Request exceeds the rate limit",
            ProblemType::LimiterUnavailable => "Rate limiter unavailable",
            ProblemType::MissingKey => "Request cannot be rate limited",
            ProblemType::Misconfigured => "Rate limiter misconfigured",
        }
    }

    /// The type's usual status code: 429 Too Many Requests, 503 Service Unavailable, 500
    /// Internal Server Error for a misconfigured limiter, or 400 Bad Request for a missing key
    /// (whose rule may choose another client error; see [`Problem::status`]).
    pub(crate) const fn status(self) -> StatusCode {
        match self {
            ProblemType::RateLimited | ProblemType::CostExceedsLimit => {
                StatusCode::TOO_MANY_REQUESTS
            }
            ProblemType::LimiterUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            ProblemType::MissingKey => StatusCode::BAD_REQUEST,
            ProblemType::Misconfigured => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// A problem details object (RFC 9457) for a limiter response, with two extension members:
/// `policy` (the refusing policy's name) and `retry_after` (seconds, the same number as the
/// `Retry-After` field), each present only where it means something.
///
/// The layer writes these itself; this type is public so a handler or a typed limit that
/// answers for the limiter (the store is down, a key is missing) sends the same body the layer
/// would. A refusal's body is [`Refused::default_response`](crate::Refused::default_response).
///
/// ```
/// use http::{Response, StatusCode, header::CONTENT_TYPE};
/// use tollgate_tower::headers::Problem;
///
/// let response: Response<Vec<u8>> =
///     Problem::missing_key("per-api-key", StatusCode::UNAUTHORIZED).into_response();
/// assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
/// assert_eq!(response.headers()[CONTENT_TYPE], "application/problem+json");
/// assert!(response.body().starts_with(br#"{"type":"urn:tollgate:problem:missing-key""#));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    kind: ProblemType,
    status: StatusCode,
    detail: String,
    policy: Option<String>,
    retry_after_secs: Option<u64>,
}

impl Problem {
    /// 429: `policy` is used up; retrying after `retry_after` (sent rounded up, at least 1 s,
    /// see [`retry_after_secs`](crate::headers::retry_after_secs)) can succeed.
    pub(crate) fn rate_limited(policy: &str, retry_after: Duration) -> Problem {
        Problem::rate_limited_secs(policy, retry_after_secs(retry_after))
    }

    /// [`rate_limited`](Self::rate_limited), told to retry after `secs` whole seconds.
    fn rate_limited_secs(policy: &str, secs: u64) -> Problem {
        let mut detail = String::from("Too many requests under the rate limit policy ");
        push_quoted(&mut detail, policy);
        let _ = write!(detail, ". Retry after {}.", seconds(secs));
        Problem {
            kind: ProblemType::RateLimited,
            status: ProblemType::RateLimited.status(),
            detail,
            policy: Some(policy.to_owned()),
            retry_after_secs: Some(secs),
        }
    }

    /// The problem answered with `status` instead of its type's usual one (a refusal a rule
    /// answers with 503).
    pub(crate) fn answered_with(mut self, status: StatusCode) -> Problem {
        self.status = status;
        self
    }

    /// 429: the request costs more than `policy` allows at once (`limit`), so it can never be
    /// accepted however long the caller waits. No `retry_after`, and no `Retry-After` field.
    pub(crate) fn cost_exceeds_limit(policy: &str, limit: u64) -> Problem {
        let mut detail = String::from("This request costs more than the rate limit policy ");
        push_quoted(&mut detail, policy);
        let _ = write!(
            detail,
            " allows at once (at most {limit}), so it can never fit the quota; \
             retrying will not help. Send smaller requests."
        );
        Problem {
            kind: ProblemType::CostExceedsLimit,
            status: ProblemType::CostExceedsLimit.status(),
            detail,
            policy: Some(policy.to_owned()),
            retry_after_secs: None,
        }
    }

    /// 503: the limiter could not decide and the rule fails closed; retry after `retry_after`
    /// (sent rounded up, at least 1 s). No `policy`: the caller did nothing wrong, and which
    /// rule's store is down is the operator's business.
    pub fn limiter_unavailable(retry_after: Duration) -> Problem {
        let secs = retry_after_secs(retry_after);
        Problem {
            kind: ProblemType::LimiterUnavailable,
            status: ProblemType::LimiterUnavailable.status(),
            detail: format!(
                "The rate limiter is temporarily unavailable, so this request was not processed. \
                 Retry after {}.",
                seconds(secs)
            ),
            policy: None,
            retry_after_secs: Some(secs),
        }
    }

    /// `status` (400 if it is not a client error): a rule that needs a key (an API key, an
    /// account) found none in the request, and says to refuse it.
    pub fn missing_key(policy: &str, status: StatusCode) -> Problem {
        let mut detail = String::from("The rate limit policy ");
        push_quoted(&mut detail, policy);
        detail.push_str(" needs a key (such as an API key or an account) that this request lacks.");
        Problem {
            kind: ProblemType::MissingKey,
            status: if status.is_client_error() {
                status
            } else {
                StatusCode::BAD_REQUEST
            },
            detail,
            policy: Some(policy.to_owned()),
            retry_after_secs: None,
        }
    }

    /// 500: the limiter cannot count this request because of how the service is deployed (an
    /// IP rule finds no peer address). Names no policy and no cause: that is in the `error`
    /// log, for the operator.
    pub(crate) fn misconfigured() -> Problem {
        Problem {
            kind: ProblemType::Misconfigured,
            status: ProblemType::Misconfigured.status(),
            detail: String::from(
                "The rate limiter is misconfigured, so this request was not processed.",
            ),
            policy: None,
            retry_after_secs: None,
        }
    }

    /// The problem for a refused policy: [`cost_exceeds_limit`](Problem::cost_exceeds_limit)
    /// for [`RefusalReason::CostExceedsLimit`], [`rate_limited`](Problem::rate_limited) for any
    /// other refusal, told to retry after the decision's
    /// [`retry_after_secs`](tollgate_core::Decision::retry_after_secs) (the `Retry-After` the
    /// layer sends); `None` when the decision allowed the request.
    pub(crate) fn for_refusal(report: &PolicyReport<'_>) -> Option<Problem> {
        Some(match report.decision.refusal()? {
            RefusalReason::CostExceedsLimit => {
                Problem::cost_exceeds_limit(report.name, report.quota.limit())
            }
            // The decision's own number, as `Retry-After` and a responder have it.
            _ => Problem::rate_limited_secs(report.name, report.decision.retry_after_secs()),
        })
    }

    /// The body: a JSON object with `type`, `title`, `status`, `detail`, then `policy` and
    /// `retry_after` when present. Strings are escaped, so any policy name or detail is safe.
    pub(crate) fn to_json(&self) -> String {
        let mut out = String::with_capacity(160 + self.detail.len());
        out.push_str("{\"type\":");
        push_json_string(&mut out, self.kind.uri());
        out.push_str(",\"title\":");
        push_json_string(&mut out, self.kind.title());
        let _ = write!(out, ",\"status\":{}", self.status.as_u16());
        out.push_str(",\"detail\":");
        push_json_string(&mut out, &self.detail);
        if let Some(policy) = &self.policy {
            out.push_str(",\"policy\":");
            push_json_string(&mut out, policy);
        }
        if let Some(secs) = self.retry_after_secs {
            let _ = write!(out, ",\"retry_after\":{secs}");
        }
        out.push('}');
        out
    }

    /// The status code, the headers (`Content-Type: application/problem+json`, and
    /// `Retry-After` when a retry can help) and the JSON body, for the caller to wrap in its own
    /// body type. Add the `RateLimit` fields to the headers as well where they are disclosed.
    pub(crate) fn into_response_parts(self) -> (StatusCode, HeaderMap, Vec<u8>) {
        let mut headers = HeaderMap::with_capacity(2);
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        if let Some(secs) = self.retry_after_secs {
            headers.insert(RETRY_AFTER, HeaderValue::from(secs));
        }
        (self.status, headers, self.to_json().into_bytes())
    }

    /// The whole response, with any body type that can be made from the JSON bytes (axum's
    /// `Body`, `http_body_util::Full<Bytes>`, `Vec<u8>`, ...).
    ///
    /// ```
    /// use std::time::Duration;
    /// use http::{Response, StatusCode};
    /// use tollgate_tower::headers::Problem;
    ///
    /// let response: Response<Vec<u8>> = Problem::limiter_unavailable(Duration::from_secs(5))
    ///     .into_response();
    /// assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    /// assert_eq!(response.headers()["retry-after"], "5");
    /// ```
    pub fn into_response<B: From<Vec<u8>>>(self) -> Response<B> {
        let (status, headers, body) = self.into_response_parts();
        let mut response = Response::new(B::from(body));
        *response.status_mut() = status;
        *response.headers_mut() = headers;
        response
    }
}

/// Appends `name` in double quotes (the JSON escaping happens later, on the whole detail).
fn push_quoted(out: &mut String, name: &str) {
    out.push('"');
    out.push_str(name);
    out.push('"');
}

/// "1 second", "5 seconds".
fn seconds(secs: u64) -> String {
    if secs == 1 {
        "1 second".to_owned()
    } else {
        format!("{secs} seconds")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use tollgate_core::{Decision, Quota};

    use super::*;

    fn parse(problem: &Problem) -> serde_json::Map<String, Value> {
        match serde_json::from_str(&problem.to_json()).unwrap() {
            Value::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    #[test]
    fn rate_limited_has_every_member() {
        let body = parse(&Problem::rate_limited("burst", Duration::from_millis(300)));
        let keys: Vec<_> = body.keys().map(String::as_str).collect();
        assert_eq!(
            keys.iter()
                .copied()
                .collect::<std::collections::BTreeSet<_>>(),
            ["detail", "policy", "retry_after", "status", "title", "type"].into()
        );
        assert_eq!(body["type"], "urn:tollgate:problem:rate-limited");
        assert_eq!(body["title"], "Too many requests");
        assert_eq!(body["status"], 429);
        assert_eq!(body["policy"], "burst");
        assert_eq!(body["retry_after"], 1);
        let detail = body["detail"].as_str().unwrap();
        assert!(
            detail.contains(r#""burst""#) && detail.contains("1 second."),
            "{detail}"
        );
    }

    #[test]
    fn cost_exceeds_limit_has_its_own_type_and_no_retry() {
        let problem = Problem::cost_exceeds_limit("bulk", 100);
        let body = parse(&problem);
        assert_eq!(body["type"], "urn:tollgate:problem:cost-exceeds-limit");
        assert_eq!(body["status"], 429);
        assert_eq!(body["policy"], "bulk");
        assert!(!body.contains_key("retry_after"));
        let detail = body["detail"].as_str().unwrap();
        assert!(
            detail.contains("never fit") && detail.contains("100"),
            "{detail}"
        );
        let (status, headers, _) = problem.into_response_parts();
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        assert!(headers.get(RETRY_AFTER).is_none());
        assert_eq!(headers[CONTENT_TYPE], PROBLEM_JSON);
    }

    #[test]
    fn limiter_unavailable_is_a_503_without_a_policy() {
        let problem = Problem::limiter_unavailable(Duration::from_millis(1001));
        let body = parse(&problem);
        assert_eq!(body["type"], "urn:tollgate:problem:limiter-unavailable");
        assert_eq!(body["status"], 503);
        assert_eq!(body["retry_after"], 2);
        assert!(!body.contains_key("policy"));
        let (status, headers, bytes) = problem.into_response_parts();
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(headers[RETRY_AFTER], "2");
        assert_eq!(headers[CONTENT_TYPE], "application/problem+json");
        let from_bytes: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(from_bytes, Value::Object(body));
    }

    #[test]
    fn names_and_details_are_escaped() {
        let name = "we\"ird\\name\n\u{1}";
        let mut problem = Problem::rate_limited(name, Duration::from_secs(3));
        problem.detail = "Ça \"va\"".into();
        let body = parse(&problem);
        assert_eq!(body["policy"], name);
        assert_eq!(body["detail"], "Ça \"va\"");
        assert_eq!(body["retry_after"], 3);
        let detail = parse(&Problem::cost_exceeds_limit(name, 1))["detail"].clone();
        assert!(detail.as_str().unwrap().contains(name));
    }

    #[test]
    fn for_refusal_picks_the_problem_from_the_decision() {
        let quota = Quota::fixed_window(100, Duration::from_secs(60)).unwrap();
        let limit = Decision::refused(
            RefusalReason::LimitReached,
            100,
            0,
            Duration::from_secs(60),
            Duration::from_millis(4500),
        );
        let too_big = Decision::refused(
            RefusalReason::CostExceedsLimit,
            100,
            100,
            Duration::ZERO,
            Duration::ZERO,
        );
        let allowed = Decision::allowed(100, 99, Duration::from_secs(60));

        let problem = Problem::for_refusal(&PolicyReport::new("burst", &quota, &limit)).unwrap();
        assert_eq!(
            problem,
            Problem::rate_limited("burst", Duration::from_secs(5))
        );
        let problem = Problem::for_refusal(&PolicyReport::new("bulk", &quota, &too_big)).unwrap();
        assert_eq!(problem, Problem::cost_exceeds_limit("bulk", 100));
        assert_eq!(
            Problem::for_refusal(&PolicyReport::new("ok", &quota, &allowed)),
            None
        );
    }

    #[test]
    fn the_response_carries_status_headers_and_body() {
        let response: Response<Vec<u8>> =
            Problem::rate_limited("burst", Duration::from_secs(2)).into_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()[RETRY_AFTER], "2");
        let body: Value = serde_json::from_slice(response.body()).unwrap();
        assert_eq!(
            body,
            json!({
                "type": "urn:tollgate:problem:rate-limited",
                "title": "Too many requests",
                "status": 429,
                "detail": "Too many requests under the rate limit policy \"burst\". Retry after 2 seconds.",
                "policy": "burst",
                "retry_after": 2,
            })
        );
    }
}
