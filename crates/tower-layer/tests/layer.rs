//! `RateLimitLayer` end to end over `ServiceExt::oneshot`: headers, refusals, rule actions,
//! store failures, shared state, exemptions, pacing, runtime rule swaps and route rules.

mod common;

use std::convert::Infallible;
use std::error::Error;
use std::future::{Future, ready};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::Value;
use tollgate_core::{
    BatchDecision, Decision, Item, Key, MemoryStore, OnStoreFailure, Quota, Rate, Receipt,
    RefundError, RuleId, Store, StoreError, Timestamp,
};
use tollgate_testing::ManualClock;
use tollgate_tower::headers::HeaderStyle;
use tollgate_tower::key::{Endpoint, ExtensionKey, Global, HeaderKey, PeerIp};
use tollgate_tower::{Flagged, MissingKey, OnRefusal, RateLimitLayer, Refused, Rule, RuleSet};
use tollgate_wrappers::FallbackStore;
use tower::{Layer, Service, ServiceExt, service_fn};

type TestResult = Result<(), Box<dyn Error>>;

/// A day-aligned instant, so every fixed window starts exactly here and `t` is exact.
const START: Timestamp = Timestamp::from_secs(20_000 * 86_400);

/// The peer most tests send from.
const PEER: [u8; 4] = [203, 0, 113, 7];

/// The account an authentication middleware would have inserted.
#[derive(Debug, Clone)]
struct Account(&'static str);

/// The inner service: 200 with a short body.
async fn ok(_request: Request<()>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::from("inner")))
}

/// An inner service that answers with the rules that flagged the request, comma-separated.
async fn echo_flags(request: Request<()>) -> Result<Response<Full<Bytes>>, Infallible> {
    let flags: Vec<&str> = request
        .extensions()
        .get::<Flagged>()
        .map(|flagged| flagged.iter().map(|(rule, _)| rule.as_str()).collect())
        .unwrap_or_default();
    Ok(Response::new(Full::from(flags.join(","))))
}

/// A memory store on a stopped clock (moved only by the test), and that clock.
fn manual_store() -> (MemoryStore<ManualClock>, ManualClock) {
    let clock = ManualClock::new(START);
    (MemoryStore::builder().clock(clock.clone()).build(), clock)
}

/// A layer over a stopped-clock memory store with `rules` for every request.
fn layer_with(rules: impl IntoIterator<Item = Rule>) -> RateLimitLayer<MemoryStore<ManualClock>> {
    let (store, _clock) = manual_store();
    rules
        .into_iter()
        .fold(RateLimitLayer::new(store), RateLimitLayer::rule)
}

/// A rule named `id` allowing `limit` a minute per peer address (fixed window).
fn per_minute(id: &str, limit: u64) -> Rule {
    let quota = Quota::fixed_window(limit, Duration::from_secs(60)).expect("a valid quota");
    Rule::new(id, quota, PeerIp::new()).expect("a valid rule id")
}

/// A rule named `id` allowing `limit` a minute per account.
fn per_account(id: &str, limit: u64) -> Rule {
    let quota = Quota::fixed_window(limit, Duration::from_secs(60)).expect("a valid quota");
    let account = ExtensionKey::new(|account: &Account| account.0);
    Rule::new(id, quota, account).expect("a valid rule id")
}

/// A request from [`PEER`].
fn request(method: Method, path: &str) -> Request<()> {
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .body(())
        .expect("a valid request");
    request
        .extensions_mut()
        .insert(SocketAddr::from((PEER, 50_000)));
    request
}

/// A GET from [`PEER`].
fn get(path: &str) -> Request<()> {
    request(Method::GET, path)
}

/// `request` from `peer` instead.
fn from_peer(peer: IpAddr, mut request: Request<()>) -> Request<()> {
    request
        .extensions_mut()
        .insert(SocketAddr::new(peer, 50_000));
    request
}

/// `request` as `account`.
fn as_account(account: &'static str, mut request: Request<()>) -> Request<()> {
    request.extensions_mut().insert(Account(account));
    request
}

/// Sends `request` through a clone of `service` and collects the response body.
async fn send<S, B>(service: &S, request: Request<()>) -> Response<Bytes>
where
    S: Service<Request<()>, Response = Response<B>> + Clone,
    S::Error: std::fmt::Debug,
    B: http_body::Body<Data = Bytes>,
    B::Error: std::fmt::Debug,
{
    let response = service
        .clone()
        .oneshot(request)
        .await
        .expect("the service answers");
    let (parts, body) = response.into_parts();
    let body = body.collect().await.expect("a readable body").to_bytes();
    Response::from_parts(parts, body)
}

/// Sends `count` copies of what `request` makes and returns their statuses.
async fn statuses<S, B>(
    service: &S,
    count: usize,
    request: impl Fn() -> Request<()>,
) -> Vec<StatusCode>
where
    S: Service<Request<()>, Response = Response<B>> + Clone,
    S::Error: std::fmt::Debug,
    B: http_body::Body<Data = Bytes>,
    B::Error: std::fmt::Debug,
{
    let mut statuses = Vec::with_capacity(count);
    for _ in 0..count {
        statuses.push(send(service, request()).await.status());
    }
    statuses
}

/// `count` times `status`.
fn times(count: usize, status: StatusCode) -> Vec<StatusCode> {
    vec![status; count]
}

/// One policy as the `RateLimit-Policy` (`q`, `w`) and `RateLimit` (`r`, `t`) fields show it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Policy {
    name: String,
    q: i64,
    w: i64,
    r: i64,
    t: i64,
}

impl Policy {
    fn new(name: &str, q: i64, w: i64, r: i64, t: i64) -> Policy {
        Policy {
            name: name.to_owned(),
            q,
            w,
            r,
            t,
        }
    }
}

/// The policies a response discloses, in field order, read with an RFC 8941 parser from both
/// IETF fields (which must name the same policies in the same order). Empty without the fields.
fn policies(response: &Response<Bytes>) -> Vec<Policy> {
    let field = |name: &str| -> Vec<(String, Vec<(String, i64)>)> {
        let Some(value) = response.headers().get(name) else {
            return Vec::new();
        };
        common::sf_members(name, value)
            .into_iter()
            .map(|member| (member.name, member.params))
            .collect()
    };
    let param = |params: &[(String, i64)], key: &str| -> i64 {
        let found = params.iter().find(|(name, _)| name == key);
        found
            .map(|(_, value)| *value)
            .expect("the parameter is there")
    };
    let terms = field("ratelimit-policy");
    let standing = field("ratelimit");
    assert_eq!(terms.len(), standing.len(), "both fields list every policy");
    terms
        .iter()
        .zip(&standing)
        .map(|((name, terms), (same_name, standing))| {
            assert_eq!(name, same_name, "both fields list policies in one order");
            Policy::new(
                name,
                param(terms, "q"),
                param(terms, "w"),
                param(standing, "r"),
                param(standing, "t"),
            )
        })
        .collect()
}

/// The names of the policies a response discloses, in order.
fn names(response: &Response<Bytes>) -> Vec<String> {
    policies(response).into_iter().map(|p| p.name).collect()
}

/// The response body as JSON.
fn json(response: &Response<Bytes>) -> Value {
    serde_json::from_slice(response.body()).expect("a JSON body")
}

/// Asserts that `response` is an `application/problem+json` answer of `status` and `problem` type.
fn assert_problem(response: &Response<Bytes>, status: StatusCode, problem: &str) {
    assert_eq!(response.status(), status);
    assert_eq!(response.headers()[CONTENT_TYPE], "application/problem+json");
    let body = json(response);
    assert_eq!(body["type"], format!("urn:tollgate:problem:{problem}"));
    assert_eq!(body["status"], status.as_u16());
}

// ---------------------------------------------------------------------------------------------
// Headers and refusals
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn allowed_responses_carry_ratelimit_policy_and_ratelimit() -> TestResult {
    // Bursts of 5, one more a second: an empty bucket refills in 5 s.
    let reads = Rule::new(
        "reads",
        Quota::token_bucket(5, Rate::per_second(1))?,
        PeerIp::new(),
    )?;
    let service = layer_with([reads]).layer(service_fn(ok));

    let first = send(&service, get("/feed")).await;
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(first.body(), "inner");
    assert_eq!(policies(&first), [Policy::new("reads", 5, 5, 4, 1)]);

    let second = send(&service, get("/feed")).await;
    assert_eq!(policies(&second), [Policy::new("reads", 5, 5, 3, 2)]);
    Ok(())
}

#[tokio::test]
async fn a_refusal_is_429_with_retry_after_rounded_up_a_problem_body_and_the_refuser_first()
-> TestResult {
    let hourly = Rule::new(
        "hourly",
        Quota::fixed_window(100, Duration::from_secs(3600))?,
        PeerIp::new(),
    )?;
    // 10 a second, burst 1: the second request at once must wait 100 ms.
    let burst = Rule::new(
        "burst",
        Quota::gcra(Rate::per_second(10), 1)?,
        PeerIp::new(),
    )?;
    let service = layer_with([hourly, burst]).layer(service_fn(ok));

    let allowed = send(&service, get("/feed")).await;
    assert_eq!(
        names(&allowed),
        ["hourly", "burst"],
        "rule order when allowed"
    );

    let refused = send(&service, get("/feed")).await;
    assert_problem(&refused, StatusCode::TOO_MANY_REQUESTS, "rate-limited");
    assert_eq!(
        refused.headers()[RETRY_AFTER],
        "1",
        "100 ms rounds up to 1 s"
    );
    let body = json(&refused);
    assert_eq!(body["policy"], "burst");
    assert_eq!(body["retry_after"], 1);
    let shown = policies(&refused);
    assert_eq!(names(&refused), ["burst", "hourly"], "the refuser first");
    assert_eq!(shown[0].r, 0);
    assert_eq!(shown[1], Policy::new("hourly", 100, 3600, 99, 3600));
    Ok(())
}

#[tokio::test]
async fn a_cost_that_can_never_fit_is_its_own_429_without_retry_after() -> TestResult {
    let quota = Quota::fixed_window(10, Duration::from_secs(60))?;
    let huge = Rule::new("computed", quota, PeerIp::new())?.cost_fn(|_| u64::MAX);
    let fixed = Rule::new("fixed", quota, PeerIp::new())?.cost(1000);
    for rule in [huge, fixed] {
        let id = rule.id().as_str().to_owned();
        let service = layer_with([rule]).layer(service_fn(ok));
        let refused = send(&service, get("/export")).await;
        assert_problem(
            &refused,
            StatusCode::TOO_MANY_REQUESTS,
            "cost-exceeds-limit",
        );
        assert!(refused.headers().get(RETRY_AFTER).is_none(), "{id}");
        assert_eq!(json(&refused)["policy"], id.as_str());
        assert!(json(&refused).get("retry_after").is_none(), "{id}");
    }
    Ok(())
}

#[tokio::test]
async fn a_request_that_can_never_fit_is_not_charged() -> TestResult {
    let quota = Quota::fixed_window(10, Duration::from_secs(60))?;
    // The cost comes from the request; a cheap one afterwards sees the whole quota.
    let export = Rule::new("export", quota, PeerIp::new())?.cost_fn(|parts| {
        let cost = parts.headers.get("x-cost").and_then(|v| v.to_str().ok());
        cost.and_then(|cost| cost.parse().ok()).unwrap_or(1)
    });
    let service = layer_with([export]).layer(service_fn(ok));
    let mut expensive = get("/export");
    expensive
        .headers_mut()
        .insert("x-cost", u64::MAX.to_string().parse()?);
    assert_eq!(
        send(&service, expensive).await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    let cheap = send(&service, get("/export")).await;
    assert_eq!(cheap.status(), StatusCode::OK);
    assert_eq!(policies(&cheap)[0].r, 9);
    Ok(())
}

#[tokio::test]
async fn all_or_nothing_a_refusal_by_one_rule_charges_no_other() -> TestResult {
    let (store, _clock) = manual_store();
    let layer = RateLimitLayer::new(store)
        .rule(per_minute("wide", 3))
        .route(Method::POST, "/posts", per_minute("narrow", 1))?;
    let service = layer.layer(service_fn(ok));

    assert_eq!(
        send(&service, request(Method::POST, "/posts"))
            .await
            .status(),
        StatusCode::OK
    );
    for _ in 0..3 {
        let refused = send(&service, request(Method::POST, "/posts")).await;
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(names(&refused), ["narrow", "wide"]);
        assert_eq!(policies(&refused)[1].r, 2, "wide was not charged");
    }
    // "wide" has 2 of 3 left: the refused posts took nothing.
    assert_eq!(
        statuses(&service, 3, || get("/feed")).await,
        [
            StatusCode::OK,
            StatusCode::OK,
            StatusCode::TOO_MANY_REQUESTS
        ]
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Missing keys
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_missing_key_refused_with_401_answers_a_problem() {
    let rule =
        per_account("per-account", 10).on_missing_key(MissingKey::Refuse(StatusCode::UNAUTHORIZED));
    let service = layer_with([rule]).layer(service_fn(ok));

    let anonymous = send(&service, get("/feed")).await;
    assert_problem(&anonymous, StatusCode::UNAUTHORIZED, "missing-key");
    assert_eq!(json(&anonymous)["policy"], "per-account");

    let signed_in = send(&service, as_account("ada", get("/feed"))).await;
    assert_eq!(signed_in.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_missing_key_skips_the_rule_by_default() {
    let service = layer_with([per_account("per-account", 1)]).layer(service_fn(ok));

    let anonymous = statuses(&service, 3, || get("/feed")).await;
    assert_eq!(anonymous, times(3, StatusCode::OK));
    assert!(policies(&send(&service, get("/feed")).await).is_empty());

    // The rule does apply to requests that have the key.
    let signed_in = statuses(&service, 2, || as_account("ada", get("/feed"))).await;
    assert_eq!(signed_in, [StatusCode::OK, StatusCode::TOO_MANY_REQUESTS]);
}

// ---------------------------------------------------------------------------------------------
// Rule actions: shadow, flag, own response, the layer's responder
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_shadow_rule_never_refuses_and_is_not_disclosed() {
    let shadow = per_minute("tighter", 1).shadow();
    let service = layer_with([shadow, per_minute("visible", 100)]).layer(service_fn(ok));

    for _ in 0..3 {
        let response = send(&service, get("/feed")).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(names(&response), ["visible"]);
    }
}

#[tokio::test]
async fn disclose_true_shows_a_shadow_policy() {
    let shadow = per_minute("tighter", 1).shadow().disclose(true);
    let service = layer_with([shadow]).layer(service_fn(ok));

    let first = send(&service, get("/feed")).await;
    assert_eq!(policies(&first), [Policy::new("tighter", 1, 60, 0, 60)]);
    let over = send(&service, get("/feed")).await;
    assert_eq!(over.status(), StatusCode::OK, "shadow rules never refuse");
    assert_eq!(names(&over), ["tighter"]);
}

#[tokio::test]
async fn a_flag_rule_lets_the_request_through_marked_flagged() {
    let flag = per_minute("signups", 1).on_refusal(OnRefusal::Flag);
    let service = layer_with([flag]).layer(service_fn(echo_flags));

    let first = send(&service, get("/signup")).await;
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(first.body(), "", "not flagged under the limit");

    let over = send(&service, get("/signup")).await;
    assert_eq!(over.status(), StatusCode::OK);
    assert_eq!(over.body(), "signups", "the inner service sees the flag");
    assert!(policies(&over).is_empty(), "flag rules are not disclosed");
}

#[tokio::test]
async fn a_rules_own_response_is_used_even_with_a_layer_responder() {
    let challenge = per_minute("signups", 1).on_refusal(OnRefusal::respond(|refused: &Refused| {
        let (rule, decision) = (refused.rule(), refused.decision());
        let body = format!("captcha for {rule}, remaining {}", decision.remaining());
        let mut response = Response::new(Bytes::from(body));
        *response.status_mut() = StatusCode::FORBIDDEN;
        response
    }));
    let layer = layer_with([challenge]).responder(|_: &Refused| Response::new(Bytes::new()));
    let service = layer.layer(service_fn(ok));

    assert_eq!(
        send(&service, get("/signup")).await.status(),
        StatusCode::OK
    );
    let challenged = send(&service, get("/signup")).await;
    assert_eq!(challenged.status(), StatusCode::FORBIDDEN);
    assert_eq!(challenged.body(), "captcha for signups, remaining 0");
}

#[tokio::test]
async fn a_rules_own_responder_is_handed_the_headers_the_layers_is() {
    // A challenge rule hides its policy unless it asks to disclose it; this one asks.
    let challenge = per_minute("signups", 1)
        .on_refusal(OnRefusal::respond(|refused: &Refused| {
            let mut page = Response::new(Bytes::from_static(b"solve the challenge"));
            *page.status_mut() = StatusCode::FORBIDDEN;
            page.headers_mut().extend(refused.headers().clone());
            page
        }))
        .disclose(true);
    let service = layer_with([challenge]).layer(service_fn(ok));

    assert_eq!(
        send(&service, get("/signup")).await.status(),
        StatusCode::OK
    );
    let challenged = send(&service, get("/signup")).await;
    assert_eq!(challenged.status(), StatusCode::FORBIDDEN);
    assert_eq!(names(&challenged), ["signups"], "the RateLimit fields");
    assert_eq!(
        challenged.headers().get(RETRY_AFTER).expect("Retry-After"),
        "60",
        "the same Retry-After the default 429 carries"
    );
}

#[tokio::test]
async fn the_layer_responder_renders_refusals_its_own_way() {
    let layer = layer_with([per_minute("burst", 1)]).responder(|refused: &Refused| {
        let body = format!(r#"{{"error":"slow_down","rule":"{}"}}"#, refused.rule());
        let mut response = Response::new(Bytes::from(body));
        *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
        response.headers_mut().extend(refused.headers().clone());
        response
    });
    let service = layer.layer(service_fn(ok));

    assert_eq!(send(&service, get("/feed")).await.status(), StatusCode::OK);
    let refused = send(&service, get("/feed")).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        json(&refused),
        serde_json::json!({"error": "slow_down", "rule": "burst"})
    );
    assert!(refused.headers().get(CONTENT_TYPE).is_none());
    assert_eq!(names(&refused), ["burst"], "the headers it was handed");
    let retry_after = refused
        .headers()
        .get(RETRY_AFTER)
        .expect("Retry-After in the headers");
    assert_eq!(retry_after, "60", "the handed headers include Retry-After");
}

// ---------------------------------------------------------------------------------------------
// Header styles
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn header_style_none_sends_no_rate_limit_fields_but_keeps_retry_after() {
    let layer = layer_with([per_minute("burst", 1)]).headers(HeaderStyle::none());
    let service = layer.layer(service_fn(ok));

    let allowed = send(&service, get("/feed")).await;
    assert!(allowed.headers().get("ratelimit").is_none());
    assert!(allowed.headers().get("ratelimit-policy").is_none());
    assert!(allowed.headers().get("x-ratelimit-limit").is_none());

    let refused = send(&service, get("/feed")).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(policies(&refused).is_empty());
    assert_eq!(refused.headers()[RETRY_AFTER], "60");
}

#[tokio::test]
async fn header_style_with_legacy_adds_x_ratelimit_fields() {
    let layer =
        layer_with([per_minute("burst", 5)]).headers(HeaderStyle::default().with_legacy(true));
    let service = layer.layer(service_fn(ok));

    let allowed = send(&service, get("/feed")).await;
    assert_eq!(allowed.headers()["x-ratelimit-limit"], "5");
    assert_eq!(allowed.headers()["x-ratelimit-remaining"], "4");
    assert_eq!(allowed.headers()["x-ratelimit-reset"], "60");
    assert_eq!(names(&allowed), ["burst"], "the IETF fields stay on");
}

// ---------------------------------------------------------------------------------------------
// Store failures
// ---------------------------------------------------------------------------------------------

/// A store that is always down: it stands in for an unreachable Redis. Its `check_now` is the
/// default `None`, so the layer takes the awaited path.
struct DeadStore;

fn down<T: Send>() -> impl Future<Output = Result<T, StoreError>> + Send {
    ready(Err(StoreError::unavailable("connection refused")))
}

impl Store for DeadStore {
    fn check(
        &self,
        _items: &[Item<'_>],
    ) -> impl Future<Output = Result<BatchDecision, StoreError>> + Send {
        down()
    }

    fn peek(&self, _item: &Item<'_>) -> impl Future<Output = Result<Decision, StoreError>> + Send {
        down()
    }

    fn refund(&self, receipt: Receipt) -> impl Future<Output = Result<(), RefundError>> + Send {
        std::future::ready(Err(RefundError::new(
            StoreError::unavailable("the test store is down"),
            receipt,
        )))
    }

    fn reset(
        &self,
        _rule: &RuleId,
        _key: &Key,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        down()
    }
}

#[tokio::test]
async fn a_rule_that_fails_closed_answers_503_with_retry_after() {
    let layer = RateLimitLayer::new(DeadStore)
        .rule(per_minute("reads", 10))
        .rule(per_minute("otp", 10).with_store_failure(OnStoreFailure::Closed))
        .unavailable_retry_after(Duration::from_millis(2500));
    let service = layer.layer(service_fn(ok));

    let response = send(&service, get("/otp")).await;
    assert_problem(
        &response,
        StatusCode::SERVICE_UNAVAILABLE,
        "limiter-unavailable",
    );
    assert_eq!(response.headers()[RETRY_AFTER], "3", "2.5 s rounds up");
    assert_eq!(json(&response)["retry_after"], 3);
    assert!(
        json(&response).get("policy").is_none(),
        "which rule is not the caller's business"
    );
}

#[tokio::test]
async fn a_flag_rule_that_fails_closed_still_lets_requests_through() {
    let layer = RateLimitLayer::new(DeadStore).rule(
        per_minute("signups", 1)
            .on_refusal(OnRefusal::Flag)
            .with_store_failure(OnStoreFailure::Closed),
    );
    let service = layer.layer(service_fn(ok));
    let response = send(&service, get("/signup")).await;
    assert_eq!(
        response.status(),
        StatusCode::OK,
        "flag rules never stop a request"
    );
}

#[tokio::test]
async fn rules_that_fail_open_let_the_request_through() {
    let layer = RateLimitLayer::new(DeadStore)
        .rule(per_minute("reads", 1).with_store_failure(OnStoreFailure::Open));
    let service = layer.layer(service_fn(ok));

    for _ in 0..3 {
        let response = send(&service, get("/feed")).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.body(), "inner");
        assert!(
            policies(&response).is_empty(),
            "no decision, nothing to show"
        );
    }
}

#[tokio::test]
async fn a_local_rule_behind_a_plain_store_that_fails_goes_open() {
    let layer = RateLimitLayer::new(DeadStore)
        .rule(per_minute("posts", 1).with_store_failure(OnStoreFailure::Local));
    let service = layer.layer(service_fn(ok));
    for _ in 0..3 {
        assert_eq!(send(&service, get("/posts")).await.status(), StatusCode::OK);
    }
}

#[tokio::test]
async fn behind_a_fallback_store_local_rules_count_in_local_memory() {
    let layer = RateLimitLayer::new(FallbackStore::builder(DeadStore).build())
        .rule(per_minute("posts", 2).with_store_failure(OnStoreFailure::Local));
    let service = layer.layer(service_fn(ok));

    for _ in 0..2 {
        assert_eq!(send(&service, get("/posts")).await.status(), StatusCode::OK);
    }
    let refused = send(&service, get("/posts")).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(refused.headers().contains_key(RETRY_AFTER));

    // Closed rules still answer 503: a store error is never a refusal.
    let layer = RateLimitLayer::new(FallbackStore::builder(DeadStore).build())
        .rule(per_minute("otp", 10).with_store_failure(OnStoreFailure::Closed));
    let response = send(&layer.layer(service_fn(ok)), get("/otp")).await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
}

#[tokio::test]
async fn a_read_only_rule_that_fails_closed_answers_503_during_an_outage() {
    let layer = RateLimitLayer::new(FallbackStore::builder(DeadStore).build())
        .rule(per_minute("posts", 2).with_store_failure(OnStoreFailure::Local))
        .rule(
            per_minute("posts-gate", 2)
                .with_mode(tollgate_core::Mode::ReadOnly)
                .with_store_failure(OnStoreFailure::Closed),
        );
    let response = send(&layer.layer(service_fn(ok)), get("/posts")).await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
}

#[test]
fn a_rule_cannot_take_the_name_of_another_rules_escalation_state() {
    for reserved in ["login.block", "login.strikes"] {
        let error = Rule::new(
            reserved,
            Quota::fixed_window(3, Duration::from_secs(60)).expect("a valid quota"),
            PeerIp::new(),
        )
        .expect_err("a reserved suffix");
        assert!(error.to_string().contains("reserved"), "{error}");
    }
}

// ---------------------------------------------------------------------------------------------
// Shared state, exemptions
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn extending_a_cloned_layer_leaves_the_base_alone() {
    let base = layer_with([per_minute("per-ip", 100)]);
    let login = base
        .clone()
        .rule(per_minute("login", 1))
        .layer(service_fn(ok));
    let search = base
        .clone()
        .rule(per_minute("search", 1))
        .layer(service_fn(ok));
    let plain = base.layer(service_fn(ok));

    assert_eq!(
        names(&send(&login, get("/login")).await),
        ["per-ip", "login"]
    );
    assert_eq!(
        names(&send(&search, get("/search")).await),
        ["per-ip", "search"]
    );
    assert_eq!(names(&send(&plain, get("/feed")).await), ["per-ip"]);
    let per_ip_left = policies(&send(&plain, get("/feed")).await)[0].r;
    assert_eq!(
        per_ip_left, 96,
        "four requests, one shared per-ip count: the store is shared"
    );
}

#[tokio::test]
async fn clones_of_services_and_of_the_layer_share_one_count() {
    let layer = layer_with([per_minute("shared", 3)]);
    let first = layer.layer(service_fn(ok));
    let second = layer.layer(service_fn(ok));
    let first_clone = first.clone();
    let from_layer_clone = layer.clone().layer(service_fn(ok));

    assert_eq!(send(&first, get("/feed")).await.status(), StatusCode::OK);
    assert_eq!(send(&second, get("/feed")).await.status(), StatusCode::OK);
    assert_eq!(
        send(&first_clone, get("/feed")).await.status(),
        StatusCode::OK
    );
    let fourth = send(&from_layer_clone, get("/feed")).await;
    assert_eq!(
        fourth.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "3 in total, not 3 each"
    );
}

#[tokio::test]
async fn an_exempt_path_skips_limiting() {
    let layer = layer_with([per_minute("all", 1)])
        .exempt_path("/healthz")
        .expect("a valid pattern");
    let service = layer.layer(service_fn(ok));

    for _ in 0..3 {
        let health = send(&service, get("/healthz")).await;
        assert_eq!(health.status(), StatusCode::OK);
        assert!(policies(&health).is_empty());
    }
    // The health checks took nothing from the quota.
    assert_eq!(
        statuses(&service, 2, || get("/feed")).await,
        [StatusCode::OK, StatusCode::TOO_MANY_REQUESTS]
    );
}

#[tokio::test]
async fn an_exempt_network_skips_limiting() -> TestResult {
    let layer = layer_with([per_minute("all", 1)]).exempt_network("10.0.0.0/8".parse()?);
    let service = layer.layer(service_fn(ok));

    // An IPv4-mapped IPv6 peer (a dual-stack listener) is the same IPv4 peer.
    for peer in ["10.20.30.40", "::ffff:10.20.30.41"] {
        let peer: IpAddr = peer.parse()?;
        let internal = statuses(&service, 3, || from_peer(peer, get("/feed"))).await;
        assert_eq!(internal, times(3, StatusCode::OK), "{peer}");
    }
    assert_eq!(
        statuses(&service, 2, || get("/feed")).await,
        [StatusCode::OK, StatusCode::TOO_MANY_REQUESTS]
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Pacing
// ---------------------------------------------------------------------------------------------

/// A layer pacing every request to 10 a second, waiting at most 500 ms.
fn paced() -> Result<RateLimitLayer<MemoryStore<ManualClock>>, Box<dyn Error>> {
    let quota = Quota::leaky_bucket(Rate::per_second(10), Duration::from_millis(500))?;
    Ok(layer_with([Rule::new("sms", quota, Global)?]))
}

#[tokio::test(start_paused = true)]
async fn pacing_delays_requests_before_the_inner_service_runs() -> TestResult {
    let start = tokio::time::Instant::now();
    // The inner service answers how long after `start` it ran, in milliseconds.
    let service = paced()?.layer(service_fn(move |_: Request<()>| async move {
        let waited = start.elapsed().as_millis().to_string();
        Ok::<_, Infallible>(Response::new(Full::from(waited)))
    }));

    let (first, second, third) = tokio::join!(
        send(&service, get("/sms")),
        send(&service, get("/sms")),
        send(&service, get("/sms")),
    );
    assert_eq!(first.body(), "0");
    assert_eq!(second.body(), "100");
    assert_eq!(third.body(), "200");
    assert!(
        [first, second, third]
            .iter()
            .all(|r| r.status() == StatusCode::OK)
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn pacing_refuses_requests_over_the_max_delay_at_once() -> TestResult {
    let service = paced()?.layer(service_fn(ok));

    // Six slots fit in 500 ms at 10 a second (waits of 0 to 500 ms); the seventh would wait 600.
    assert_eq!(
        statuses(&service, 6, || get("/sms")).await,
        times(6, StatusCode::OK)
    );
    let before = tokio::time::Instant::now();
    let refused = send(&service, get("/sms")).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers()[RETRY_AFTER], "1");
    assert_eq!(before.elapsed(), Duration::ZERO, "a refusal does not wait");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Rules at runtime, route rules
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn replace_rules_takes_effect_on_the_next_request() {
    let layer = layer_with([per_minute("old", 1)]);
    let service = layer.layer(service_fn(ok));
    assert_eq!(
        statuses(&service, 2, || get("/feed")).await,
        [StatusCode::OK, StatusCode::TOO_MANY_REQUESTS]
    );

    layer
        .handle()
        .replace_rules(RuleSet::new().rule(per_minute("new", 3)))
        .expect("the layer's store can count these rules");
    let next = send(&service, get("/feed")).await;
    assert_eq!(next.status(), StatusCode::OK);
    assert_eq!(policies(&next), [Policy::new("new", 3, 60, 2, 60)]);

    layer
        .handle()
        .replace_rules(RuleSet::new())
        .expect("the layer's store can count these rules");
    assert_eq!(
        statuses(&service, 5, || get("/feed")).await,
        times(5, StatusCode::OK)
    );
}

#[tokio::test]
async fn a_registry_quota_replaces_the_rules_own_on_the_next_request() -> TestResult {
    let registry = tollgate_tower::QuotaRegistry::new();
    let layer = layer_with([per_minute("reads", 1)]).registry(registry.clone());
    let service = layer.layer(service_fn(ok));
    assert_eq!(send(&service, get("/feed")).await.status(), StatusCode::OK);
    assert_eq!(
        send(&service, get("/feed")).await.status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    registry.set(
        RuleId::new("reads")?,
        Quota::fixed_window(3, Duration::from_secs(60))?,
    );
    let raised = send(&service, get("/feed")).await;
    assert_eq!(
        raised.status(),
        StatusCode::OK,
        "the same count, a bigger quota"
    );
    assert_eq!(policies(&raised)[0].q, 3, "the headers show the live quota");
    Ok(())
}

#[tokio::test]
async fn an_empty_segment_cannot_slip_past_a_route_rule() -> TestResult {
    let layer =
        layer_with([]).route(Method::POST, "/users/{id}/follow", per_minute("follow", 1))?;
    let service = layer.layer(service_fn(ok));
    assert_eq!(
        send(&service, request(Method::POST, "/users/7/follow"))
            .await
            .status(),
        StatusCode::OK
    );
    assert_eq!(
        send(&service, request(Method::POST, "/users//follow"))
            .await
            .status(),
        StatusCode::TOO_MANY_REQUESTS,
        "axum routes an empty segment to {{id}}, so the rule counts it"
    );
    Ok(())
}

#[tokio::test]
async fn a_get_row_also_counts_head_requests() {
    let layer = layer_with([])
        .route(Method::GET, "/feed", per_minute("reads", 2))
        .expect("a valid pattern");
    let service = layer.layer(service_fn(ok));
    assert_eq!(send(&service, get("/feed")).await.status(), StatusCode::OK);
    assert_eq!(
        send(&service, request(Method::HEAD, "/feed"))
            .await
            .status(),
        StatusCode::OK
    );
    let third = send(&service, request(Method::HEAD, "/feed")).await;
    assert_eq!(
        third.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "HEAD runs the GET handler"
    );
}

#[tokio::test]
async fn when_several_rules_refuse_the_longest_wait_is_reported() -> TestResult {
    let burst = Rule::new(
        "burst",
        Quota::gcra(Rate::per_second(10), 1)?,
        PeerIp::new(),
    )?;
    let daily = Rule::new(
        "daily",
        Quota::fixed_window(1, Duration::from_secs(86_400))?,
        PeerIp::new(),
    )?;
    let service = layer_with([burst, daily]).layer(service_fn(ok));
    assert_eq!(send(&service, get("/feed")).await.status(), StatusCode::OK);
    let refused = send(&service, get("/feed")).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        names(&refused)[0],
        "daily",
        "the refusal that lasts longest comes first"
    );
    assert_eq!(refused.headers()[RETRY_AFTER], "86400");
    Ok(())
}

#[tokio::test]
async fn a_repeated_header_counts_its_first_value_and_over_long_values_share_one_count()
-> TestResult {
    let api_key = HeaderKey::new(http::HeaderName::from_static("x-api-key")).max_len(16);
    let rule = Rule::new(
        "partner",
        Quota::fixed_window(2, Duration::from_secs(60))?,
        api_key,
    )?;
    let service = layer_with([rule]).layer(service_fn(ok));
    let with_keys = |keys: &[&str]| {
        let mut request = get("/partner");
        for key in keys {
            request
                .headers_mut()
                .append("x-api-key", key.parse().expect("a header value"));
        }
        request
    };
    for _ in 0..2 {
        let doubled = send(&service, with_keys(&["k1", "other"])).await;
        assert_eq!(doubled.status(), StatusCode::OK);
    }
    let escaped = send(&service, with_keys(&["k1", "fresh"])).await;
    assert_eq!(
        escaped.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "no escape by repeating"
    );
    let long = |suffix: &str| with_keys(&[&format!("{}{suffix}", "x".repeat(40))]);
    assert_eq!(send(&service, long("a")).await.status(), StatusCode::OK);
    assert_eq!(send(&service, long("b")).await.status(), StatusCode::OK);
    let third = send(&service, long("c")).await;
    assert_eq!(
        third.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "over-long keys share a count"
    );
    Ok(())
}

#[tokio::test]
async fn bearer_tokens_as_long_as_real_jwts_keep_separate_counts() -> TestResult {
    let token = HeaderKey::new(http::header::AUTHORIZATION);
    let rule = Rule::new(
        "per-token",
        Quota::fixed_window(5, Duration::from_secs(60))?,
        token,
    )?;
    let service = layer_with([rule]).layer(service_fn(ok));
    let bearer = |fill: char| {
        let mut request = get("/api");
        let value = format!("Bearer {}", fill.to_string().repeat(403));
        assert_eq!(value.len(), 410);
        request.headers_mut().insert(
            http::header::AUTHORIZATION,
            value.parse().expect("a header value"),
        );
        request
    };
    for _ in 0..5 {
        assert_eq!(send(&service, bearer('a')).await.status(), StatusCode::OK);
    }
    assert_eq!(
        send(&service, bearer('a')).await.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "the first token has used its five"
    );
    assert_eq!(
        send(&service, bearer('b')).await.status(),
        StatusCode::OK,
        "a different 410-byte token has its own count"
    );
    Ok(())
}

#[tokio::test]
async fn an_endpoint_key_without_a_route_pattern_is_one_shared_route() -> TestResult {
    let rule = Rule::new(
        "per-endpoint",
        Quota::fixed_window(2, Duration::from_secs(60))?,
        (PeerIp::new(), Endpoint),
    )?;
    let service = layer_with([rule]).layer(service_fn(ok));
    assert_eq!(send(&service, get("/a")).await.status(), StatusCode::OK);
    assert_eq!(send(&service, get("/b")).await.status(), StatusCode::OK);
    let third = send(&service, get("/c")).await;
    assert_eq!(
        third.status(),
        StatusCode::TOO_MANY_REQUESTS,
        "varying the path does not escape"
    );
    Ok(())
}

#[tokio::test]
async fn a_route_rule_applies_only_to_its_method_and_path() {
    let (store, _clock) = manual_store();
    let layer = RateLimitLayer::new(store)
        .route(Method::POST, "/posts", per_minute("posting", 1))
        .expect("a valid pattern");
    let service = layer.layer(service_fn(ok));

    for other in [
        get("/posts"),
        request(Method::POST, "/posts/1"),
        request(Method::POST, "/post"),
    ] {
        let response = send(&service, other).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert!(policies(&response).is_empty());
    }
    let post = send(&service, request(Method::POST, "/posts")).await;
    assert_eq!(names(&post), ["posting"]);
    let again = send(&service, request(Method::POST, "/posts")).await;
    assert_eq!(again.status(), StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn an_endpoint_key_counts_per_route_pattern_not_per_path() -> TestResult {
    let quota = Quota::fixed_window(2, Duration::from_secs(60))?;
    let account = ExtensionKey::new(|account: &Account| account.0);
    let per_endpoint = Rule::new("per-endpoint", quota, (account, Endpoint))?;
    let (store, _clock) = manual_store();
    let layer = RateLimitLayer::new(store)
        .route(Method::POST, "/users/{id}/follow", per_endpoint.clone())?
        .route(Method::POST, "/users/{id}/mute", per_endpoint)?;
    let service = layer.layer(service_fn(ok));
    let post = |account, path: &str| as_account(account, request(Method::POST, path));

    // Different ids, one route: one count.
    assert_eq!(
        send(&service, post("ada", "/users/1/follow"))
            .await
            .status(),
        StatusCode::OK
    );
    assert_eq!(
        send(&service, post("ada", "/users/2/follow"))
            .await
            .status(),
        StatusCode::OK
    );
    let third = send(&service, post("ada", "/users/3/follow")).await;
    assert_eq!(third.status(), StatusCode::TOO_MANY_REQUESTS);
    // Another route pattern, or another account: counted apart.
    assert_eq!(
        send(&service, post("ada", "/users/4/mute")).await.status(),
        StatusCode::OK
    );
    assert_eq!(
        send(&service, post("bob", "/users/5/follow"))
            .await
            .status(),
        StatusCode::OK
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Shadow and undisclosed rules stay silent (each of these once failed)
// ---------------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_shadow_pacing_rule_does_not_delay_requests() -> TestResult {
    let quota = Quota::leaky_bucket(Rate::per_second(10), Duration::from_millis(500))?;
    let service = layer_with([Rule::new("sms", quota, Global)?.shadow()]).layer(service_fn(ok));

    for _ in 0..3 {
        let before = tokio::time::Instant::now();
        assert_eq!(send(&service, get("/sms")).await.status(), StatusCode::OK);
        assert_eq!(before.elapsed(), Duration::ZERO, "shadow rules only report");
    }
    Ok(())
}

#[tokio::test]
async fn a_shadow_rule_never_refuses_a_request_without_its_key() {
    let rule = per_account("per-account", 10)
        .shadow()
        .on_missing_key(MissingKey::Refuse(StatusCode::UNAUTHORIZED));
    let service = layer_with([rule]).layer(service_fn(ok));

    assert_eq!(send(&service, get("/feed")).await.status(), StatusCode::OK);
}

#[tokio::test]
async fn an_undisclosed_rule_stays_out_of_the_fields_when_it_refuses() {
    let secret = per_minute("secret", 1).disclose(false);
    let service = layer_with([secret, per_minute("open", 5)]).layer(service_fn(ok));

    assert_eq!(names(&send(&service, get("/feed")).await), ["open"]);
    let refused = send(&service, get("/feed")).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(names(&refused), ["open"]);
}

#[tokio::test]
async fn while_the_store_fails_each_rule_is_counted_as_its_policy_answers() {
    let layer = RateLimitLayer::new(DeadStore)
        .rule(per_minute("reads", 10))
        .rule(per_minute("otp", 10).with_store_failure(OnStoreFailure::Closed))
        .track_stats();
    let service = layer.layer(service_fn(ok));
    let closed = send(&service, get("/otp")).await;
    assert_eq!(closed.status(), StatusCode::SERVICE_UNAVAILABLE);
    let stats = |id: &str| {
        layer
            .handle()
            .stats(&RuleId::new(id).expect("id"))
            .expect("tracked")
            .since_start
    };
    assert_eq!(
        (stats("reads").allowed, stats("reads").refused),
        (1, 0),
        "fails open"
    );
    assert_eq!(
        (stats("otp").allowed, stats("otp").refused),
        (0, 1),
        "fails closed"
    );
}
