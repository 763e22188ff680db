//! Typed limits in handlers over real HTTP: a Chirp-like axum app on a loopback port, a reqwest
//! client, and limits declared as types next to the handlers they protect. Handlers and the
//! layer share one store and one registry of live quotas, as an application would set them up.
//! The store's clock stands still (a `ManualClock`), so no window rolls over during a test.

#[path = "../../tower-layer/tests/common/mod.rs"]
mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{ConnectInfo, FromRequestParts, Request};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Json, Router};
use common::events::{Recorder, RefusalsBy};
use common::server::{Reply, TestServer};
use common::{SfMember, sf_members};
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::request::Parts;
use http::{HeaderName, Method, StatusCode};
use serde::Deserialize;
use serde_json::Value;
use tokio::task::JoinSet;
use tollgate_axum::{Limit, LimitRejection, Limited, Limiter, Tollgate};
use tollgate_core::{
    BatchDecision, Decision, Item, Key, MemoryStore, Mode, OnStoreFailure, Quota, QuotaError,
    Receipt, RefundError, RuleId, Store, StoreError, Timestamp,
};
use tollgate_testing::ManualClock;
use tollgate_tower::key::HeaderKey;
use tollgate_tower::{QuotaRegistry, RateLimitLayer, Rule};
use tollgate_wrappers::FallbackStore;
use tower::ServiceExt;

/// Where the store's clock stands for every test.
const NOW: Timestamp = Timestamp::from_secs(1_700_000_000);

const MINUTE: Duration = Duration::from_secs(60);
const HOUR: Duration = Duration::from_secs(3_600);
const DAY: Duration = Duration::from_secs(86_400);

/// The password of every account in these tests.
const PASSWORD: &str = "correct horse battery staple";

const FOLLOW: &str = "/users/42/follow";
const FOLLOW_OR_SIGN_UP: &str = "/users/42/follow-or-sign-up";
const LOGIN: &str = "/login";
const POSTS: &str = "/posts";
const COMMENTS: &str = "/comments";
const EXPORTS: &str = "/exports";
const INVITES: &str = "/invites";

// ---------------------------------------------------------------------------------------------
// The limits, declared as types
// ---------------------------------------------------------------------------------------------

/// The signed-in account, which the [`sign_in`] middleware takes from the `x-account` header.
#[derive(Debug, Clone)]
struct AccountId(String);

/// The signed-in account's key; `None` for an anonymous caller.
fn account_key(request: &Parts) -> Option<Key> {
    request
        .extensions
        .get::<AccountId>()
        .map(|account| Key::new(&account.0))
}

/// 400 follows a day per account.
struct FollowsPerDay;

impl Limit for FollowsPerDay {
    const ID: &'static str = "follows-per-day";
    fn default_quota() -> Result<Quota, QuotaError> {
        Quota::sliding_window_counter(400, DAY)
    }
    fn key(request: &Parts) -> Option<Key> {
        account_key(request)
    }
}

/// 10 login attempts per target account per 15 minutes, whoever tries; fails closed.
struct LoginAttemptsPerAccount;

impl Limit for LoginAttemptsPerAccount {
    const ID: &'static str = "login-attempts-per-account";
    fn default_quota() -> Result<Quota, QuotaError> {
        Quota::sliding_window_log(10, 15 * MINUTE)
    }
    fn on_store_failure() -> OnStoreFailure {
        OnStoreFailure::Closed
    }
}

/// One post a minute per account: the typed twin of the layer's [`comments_rule`].
struct PostsPerMinute;

impl Limit for PostsPerMinute {
    const ID: &'static str = "posts-per-minute";
    fn default_quota() -> Result<Quota, QuotaError> {
        Quota::fixed_window(1, MINUTE)
    }
    fn key(request: &Parts) -> Option<Key> {
        account_key(request)
    }
}

/// A trial of 2 exports a day per account, in shadow mode: it never refuses, only reports.
struct ExportsPerDayTrial;

impl Limit for ExportsPerDayTrial {
    const ID: &'static str = "exports-per-day-trial";
    fn default_quota() -> Result<Quota, QuotaError> {
        Quota::fixed_window(2, DAY)
    }
    fn key(request: &Parts) -> Option<Key> {
        account_key(request)
    }
    fn mode() -> Mode {
        Mode::Shadow
    }
}

/// 5 invites an hour per account; checked together with [`InvitesGlobal`].
struct InvitesPerAccount;

impl Limit for InvitesPerAccount {
    const ID: &'static str = "invites-per-account";
    fn default_quota() -> Result<Quota, QuotaError> {
        Quota::fixed_window(5, HOUR)
    }
}

/// One invite an hour across all accounts (raised through the registry when a test needs more).
struct InvitesGlobal;

impl Limit for InvitesGlobal {
    const ID: &'static str = "invites-global";
    fn default_quota() -> Result<Quota, QuotaError> {
        Quota::fixed_window(1, HOUR)
    }
}

/// The layer's rule for comments: one a minute per `x-account`, the same quota as
/// [`PostsPerMinute`], so their refusals can be compared field by field.
fn comments_rule() -> Rule {
    let quota = Quota::fixed_window(1, MINUTE).expect("a valid quota");
    let key = HeaderKey::new(HeaderName::from_static("x-account"));
    Rule::new("comments-per-minute", quota, key).expect("a valid rule id")
}

// ---------------------------------------------------------------------------------------------
// The app: handlers, routes and how they are wired
// ---------------------------------------------------------------------------------------------

/// Puts the caller's [`AccountId`] in the request's extensions; anonymous requests get none.
async fn sign_in(mut request: Request, next: Next) -> Response {
    let account = request
        .headers()
        .get("x-account")
        .and_then(|value| value.to_str().ok())
        .map(|account| AccountId(account.to_owned()));
    if let Some(account) = account {
        request.extensions_mut().insert(account);
    }
    next.run(request).await
}

async fn follow(limit: Limited<FollowsPerDay>) -> impl IntoResponse {
    (limit.charged().headers(), "followed")
}

async fn follow_or_sign_up(limit: Option<Limited<FollowsPerDay>>) -> &'static str {
    match limit {
        Some(_) => "followed",
        None => "anonymous",
    }
}

#[derive(Deserialize)]
struct LoginForm {
    account: String,
    password: String,
}

/// Counts attempts per target account (from the body, not the caller), but only failed ones.
async fn login(limiter: Limiter, Json(form): Json<LoginForm>) -> Result<Response, LimitRejection> {
    let attempt = limiter
        .check::<LoginAttemptsPerAccount>(&Key::new(&form.account))
        .await
        .inspect_err(|rejection| {
            // A store failure is kept as the rejection's source, for the app's error reports.
            let source = std::error::Error::source(rejection).map(ToString::to_string);
            assert_eq!(
                source.is_some(),
                rejection.is_store_unavailable(),
                "{rejection}: {source:?}"
            );
        })?;
    if form.password != PASSWORD {
        return Ok(StatusCode::UNAUTHORIZED.into_response());
    }
    if attempt.refund().await.is_err() {
        return Ok(StatusCode::INTERNAL_SERVER_ERROR.into_response());
    }
    Ok("welcome".into_response())
}

async fn post_status(_limit: Limited<PostsPerMinute>) -> &'static str {
    "posted"
}

/// Limited by the layer's [`comments_rule`], not by the handler.
async fn comment() -> &'static str {
    "commented"
}

async fn export(_limit: Limited<ExportsPerDayTrial>) -> &'static str {
    "exported"
}

async fn invite(
    limiter: Limiter,
    Extension(account): Extension<AccountId>,
) -> Result<impl IntoResponse, LimitRejection> {
    let charged = limiter
        .all()
        .check::<InvitesPerAccount>(&Key::new(&account.0))
        .check::<InvitesGlobal>(&Key::global())
        .run()
        .await?;
    Ok((charged.headers(), "invited"))
}

/// Every route and the sign-in middleware, but no [`Tollgate`]: what a router that forgot it
/// looks like.
fn routes() -> Router {
    Router::new()
        .route(FOLLOW, post(follow))
        .route(FOLLOW_OR_SIGN_UP, post(follow_or_sign_up))
        .route(LOGIN, post(login))
        .route(POSTS, post(post_status))
        .route(COMMENTS, post(comment))
        .route(EXPORTS, post(export))
        .route(INVITES, post(invite))
        .layer(middleware::from_fn(sign_in))
}

/// The routes with typed limits counting through `tollgate`.
fn app(tollgate: Tollgate) -> Router {
    routes().layer(Extension(tollgate))
}

/// The app as an application builds it: handlers and the layer share one store (whose clock
/// stands still) and `registry`.
fn chirp(registry: &QuotaRegistry) -> Router {
    let store = MemoryStore::builder().clock(ManualClock::new(NOW)).build();
    let tollgate = Tollgate::new(store.clone()).registry(registry.clone());
    let layer = RateLimitLayer::new(store)
        .registry(registry.clone())
        .route(Method::POST, COMMENTS, comments_rule())
        .expect("a valid pattern");
    app(tollgate).layer(layer)
}

/// [`chirp`] with a registry nobody changes.
fn fixed_chirp() -> Router {
    chirp(&QuotaRegistry::new())
}

/// A store whose backend is always down.
struct DownStore;

fn down() -> StoreError {
    StoreError::unavailable("the test store is always down")
}

impl Store for DownStore {
    async fn check(&self, _items: &[Item<'_>]) -> Result<BatchDecision, StoreError> {
        Err(down())
    }
    async fn peek(&self, _item: &Item<'_>) -> Result<Decision, StoreError> {
        Err(down())
    }
    async fn refund(&self, receipt: Receipt) -> Result<(), RefundError> {
        Err(RefundError::new(down(), receipt))
    }
    async fn reset(&self, _rule: &RuleId, _key: &Key) -> Result<(), StoreError> {
        Err(down())
    }
}

// ---------------------------------------------------------------------------------------------
// The server, the client and what comes back
// ---------------------------------------------------------------------------------------------

/// The test server, with this file's request helpers.
type Server = TestServer;

impl TestServer {
    /// `POST path`, as `account` if given, with a JSON body if given.
    async fn post(&self, path: &str, account: Option<&str>, json: Option<Value>) -> Reply {
        let mut request = self.client.post(self.url(path));
        if let Some(account) = account {
            request = request.header("x-account", account);
        }
        if let Some(json) = json {
            request = request
                .header(CONTENT_TYPE, "application/json")
                .body(json.to_string());
        }
        Reply::send(request).await
    }

    async fn post_as(&self, path: &str, account: &str) -> Reply {
        self.post(path, Some(account), None).await
    }

    async fn post_anonymously(&self, path: &str) -> Reply {
        self.post(path, None, None).await
    }

    /// The statuses of `count` posts to `path` as `account`, one after another.
    async fn statuses_as(&self, path: &str, account: &str, count: usize) -> Vec<StatusCode> {
        let mut statuses = Vec::with_capacity(count);
        for _ in 0..count {
            statuses.push(self.post_as(path, account).await.status);
        }
        statuses
    }

    /// The reply to `POST path` as `account` after `allowed` posts that must pass.
    async fn refusal_after(&self, path: &str, account: &str, allowed: usize) -> Reply {
        let statuses = self.statuses_as(path, account, allowed).await;
        assert_eq!(statuses, times(allowed, StatusCode::OK), "POST {path}");
        self.post_as(path, account).await
    }

    /// Logs in to `account` with `password`.
    async fn login(&self, account: &str, password: &str) -> Reply {
        self.post(LOGIN, None, Some(login_form(account, password)))
            .await
    }

    /// The statuses of `count` logins, one after another.
    async fn logins(&self, account: &str, password: &str, count: usize) -> Vec<StatusCode> {
        let mut statuses = Vec::with_capacity(count);
        for _ in 0..count {
            statuses.push(self.login(account, password).await.status);
        }
        statuses
    }
}

fn login_form(account: &str, password: &str) -> Value {
    serde_json::json!({ "account": account, "password": password })
}

/// `count` copies of `status`.
fn times(count: usize, status: StatusCode) -> Vec<StatusCode> {
    vec![status; count]
}

impl Reply {
    /// `Retry-After`, which must be a whole number of seconds.
    fn retry_after_secs(&self) -> u64 {
        let value = self.headers.get(RETRY_AFTER).expect("a Retry-After field");
        value
            .to_str()
            .ok()
            .and_then(|secs| secs.parse().ok())
            .unwrap_or_else(|| panic!("Retry-After {value:?} is not a whole number of seconds"))
    }

    fn content_type(&self) -> &str {
        self.headers
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .expect("a textual content-type")
    }

    /// The body as a problem details object.
    fn problem(&self) -> Value {
        assert_eq!(self.content_type(), "application/problem+json");
        let problem: Value = serde_json::from_str(&self.body).expect("a JSON body");
        assert!(problem.is_object(), "a JSON object: {problem}");
        problem
    }

    /// `field`, parsed as an RFC 8941 list of policies with integer parameters.
    fn policies(&self, field: &str) -> Vec<SfMember> {
        let value = self
            .headers
            .get(field)
            .unwrap_or_else(|| panic!("no `{field}` field in {:?}", self.headers));
        sf_members(field, value)
    }

    /// `field`'s member for `policy`.
    fn policy(&self, field: &str, policy: &str) -> SfMember {
        self.policies(field)
            .into_iter()
            .find(|member| member.name == policy)
            .unwrap_or_else(|| panic!("no {policy:?} in `{field}` of {:?}", self.headers))
    }
}

/// A refusal with its policy's name taken out: what must not depend on whether a handler or the
/// layer refused.
#[derive(Debug, PartialEq)]
struct RefusalFormat {
    status: StatusCode,
    content_type: String,
    retry_after_secs: u64,
    /// The parameters of each `RateLimit-Policy` member, in order.
    policy_params: Vec<Vec<(String, i64)>>,
    /// The parameters of each `RateLimit` member, in order.
    rate_limit_params: Vec<Vec<(String, i64)>>,
    /// The problem's members, sorted, and the values that do not name the policy.
    problem_members: Vec<String>,
    problem_type: Value,
    problem_status: Value,
    problem_retry_after: Value,
}

impl RefusalFormat {
    /// `reply`'s format, after checking that both rate-limit fields name exactly the policy its
    /// problem body names.
    fn of(reply: &Reply) -> RefusalFormat {
        let problem = reply.problem();
        let policy = problem["policy"].as_str().expect("a policy member");
        let policy_field = reply.policies("ratelimit-policy");
        let rate_limit_field = reply.policies("ratelimit");
        for field in [&policy_field, &rate_limit_field] {
            let names: Vec<&str> = field.iter().map(|member| member.name.as_str()).collect();
            assert_eq!(names, [policy], "{reply:?}");
        }
        let params = |field: Vec<SfMember>| field.into_iter().map(|member| member.params).collect();
        let mut problem_members: Vec<String> = problem
            .as_object()
            .expect("an object")
            .keys()
            .cloned()
            .collect();
        problem_members.sort();
        RefusalFormat {
            status: reply.status,
            content_type: reply.content_type().to_owned(),
            retry_after_secs: reply.retry_after_secs(),
            policy_params: params(policy_field),
            rate_limit_params: params(rate_limit_field),
            problem_members,
            problem_type: problem["type"].clone(),
            problem_status: problem["status"].clone(),
            problem_retry_after: problem["retry_after"].clone(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Recording refusal events
// ---------------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn the_401st_follow_in_a_day_is_refused() {
    let server = Server::start(fixed_chirp()).await;

    let refused = server.refusal_after(FOLLOW, "alice", 400).await;

    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(refused.retry_after_secs() >= 1, "{refused:?}");
    let problem = refused.problem();
    assert_eq!(problem["type"], "urn:tollgate:problem:rate-limited");
    assert_eq!(problem["policy"], "follows-per-day");
    assert_eq!(problem["retry_after"], refused.retry_after_secs());
    let policy = refused.policy("ratelimit-policy", "follows-per-day");
    assert_eq!(policy.param("q"), 400);
    assert_eq!(policy.param("w"), 86_400);
    assert_eq!(refused.policy("ratelimit", "follows-per-day").param("r"), 0);
}

#[tokio::test]
async fn login_attempts_for_one_account_from_50_addresses_are_refused_after_10() {
    let app = fixed_chirp();
    let peer = |n: u8| SocketAddr::from(([198, 51, 100, n], 40_000 + u16::from(n)));
    let login_from = |peer: SocketAddr, account: &str| {
        let request = Request::post(LOGIN)
            .header(CONTENT_TYPE, "application/json")
            .extension(ConnectInfo(peer))
            .body(Body::from(login_form(account, "wrong").to_string()))
            .expect("a request");
        let app = app.clone();
        async move {
            let response = app.oneshot(request).await.expect("infallible");
            response.status()
        }
    };

    let mut statuses = Vec::new();
    for n in 1..=50 {
        statuses.push(login_from(peer(n), "alice").await);
    }

    let expected = [
        times(10, StatusCode::UNAUTHORIZED),
        times(40, StatusCode::TOO_MANY_REQUESTS),
    ];
    assert_eq!(statuses, expected.concat());
    // Counted per target account, not for everyone: another account still has its attempts.
    assert_eq!(login_from(peer(51), "bob").await, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn successful_logins_are_refunded_and_do_not_count() {
    let server = Server::start(fixed_chirp()).await;

    let successes = server.logins("alice", PASSWORD, 30).await;
    let failures = server.logins("alice", "wrong", 11).await;

    assert_eq!(successes, times(30, StatusCode::OK));
    let expected = [
        times(10, StatusCode::UNAUTHORIZED),
        times(1, StatusCode::TOO_MANY_REQUESTS),
    ];
    assert_eq!(failures, expected.concat());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_failed_logins_against_one_remaining_attempt_let_one_through() {
    let server = Arc::new(Server::start(fixed_chirp()).await);
    assert_eq!(
        server.logins("alice", "wrong", 9).await,
        times(9, StatusCode::UNAUTHORIZED)
    );

    let mut logins = JoinSet::new();
    for _ in 0..50 {
        let server = Arc::clone(&server);
        logins.spawn(async move { server.login("alice", "wrong").await.status });
    }
    let statuses = logins.join_all().await;

    let through = statuses
        .iter()
        .filter(|status| **status == StatusCode::UNAUTHORIZED)
        .count();
    let refused = statuses
        .iter()
        .filter(|status| **status == StatusCode::TOO_MANY_REQUESTS)
        .count();
    assert_eq!((through, refused), (1, 49), "{statuses:?}");
}

#[tokio::test]
async fn a_shadow_limit_lets_everything_through_and_records_would_be_refusals() {
    let recorder = Recorder::global();
    let server = Server::start(fixed_chirp()).await;

    let statuses = server.statuses_as(EXPORTS, "alice", 5).await;

    assert_eq!(statuses, times(5, StatusCode::OK));
    // Exports 3, 4 and 5 would have been refused by the trial's quota of 2.
    let refusals = recorder.refusals_by(ExportsPerDayTrial::ID);
    assert_eq!(refusals.len(), 3, "{refusals:?}");
    for refusal in &refusals {
        assert_eq!(refusal.field("enforced"), Some("false"), "{refusal:?}");
    }
}

#[tokio::test]
async fn a_handler_refusal_and_a_layer_refusal_have_the_same_format() {
    let server = Server::start(fixed_chirp()).await;

    let by_handler = server.refusal_after(POSTS, "alice", 1).await;
    let by_layer = server.refusal_after(COMMENTS, "alice", 1).await;

    assert_eq!(by_handler.problem()["policy"], "posts-per-minute");
    assert_eq!(by_layer.problem()["policy"], "comments-per-minute");
    let format = RefusalFormat::of(&by_handler);
    assert_eq!(format, RefusalFormat::of(&by_layer));
    assert_eq!(format.status, StatusCode::TOO_MANY_REQUESTS);
}

/// A layer with its own responder, and typed limits built from it: a refusal by either is the
/// responder's, and they count in one store.
#[tokio::test]
async fn a_tollgate_built_from_the_layer_refuses_exactly_as_the_layer_does() {
    let store = MemoryStore::builder().clock(ManualClock::new(NOW)).build();
    let layer = RateLimitLayer::new(store)
        .registry(QuotaRegistry::new())
        .route(Method::POST, COMMENTS, comments_rule())
        .expect("a valid pattern")
        .responder(|refused| {
            let body = format!(r#"{{"error":"slow_down","policy":"{}"}}"#, refused.rule());
            let mut response = http::Response::new(bytes::Bytes::from(body));
            *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
            response.headers_mut().extend(refused.headers().clone());
            response
        });
    let tollgate = Tollgate::from_layer(&layer);
    let server = Server::start(app(tollgate).layer(layer)).await;

    let by_handler = server.refusal_after(POSTS, "alice", 1).await;
    let by_layer = server.refusal_after(COMMENTS, "alice", 1).await;
    assert_eq!(
        by_handler.body,
        r#"{"error":"slow_down","policy":"posts-per-minute"}"#
    );
    assert_eq!(
        by_layer.body,
        r#"{"error":"slow_down","policy":"comments-per-minute"}"#
    );
    assert!(by_handler.headers.contains_key(RETRY_AFTER));
}

/// An app with state gives the handle through `FromRef`: no extension needed.
#[tokio::test]
async fn typed_limits_find_the_tollgate_in_the_router_state() {
    #[derive(Clone)]
    struct AppState {
        tollgate: Tollgate,
    }
    impl axum::extract::FromRef<AppState> for Tollgate {
        fn from_ref(state: &AppState) -> Tollgate {
            state.tollgate.clone()
        }
    }
    let store = MemoryStore::builder().clock(ManualClock::new(NOW)).build();
    let state = AppState {
        tollgate: Tollgate::new(store),
    };
    let app = Router::new()
        .route(POSTS, post(post_status))
        .layer(middleware::from_fn(sign_in))
        .with_state(state);
    let server = Server::start(app).await;
    let refused = server.refusal_after(POSTS, "alice", 1).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.problem()["policy"], "posts-per-minute");
}

#[tokio::test]
async fn a_registry_change_to_a_typed_limit_takes_effect_on_the_next_request()
-> Result<(), Box<dyn std::error::Error>> {
    let registry = QuotaRegistry::new();
    let server = Server::start(chirp(&registry)).await;
    let follows = RuleId::new(FollowsPerDay::ID)?;
    let quota_shown = |reply: &Reply| {
        reply
            .policy("ratelimit-policy", FollowsPerDay::ID)
            .param("q")
    };

    let first = server.post_as(FOLLOW, "alice").await;
    assert_eq!(first.status, StatusCode::OK);
    assert_eq!(quota_shown(&first), 400);

    registry.set(follows.clone(), Quota::sliding_window_counter(3, DAY)?);
    let lowered = server.refusal_after(FOLLOW, "alice", 2).await;
    assert_eq!(lowered.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(quota_shown(&lowered), 3);

    registry.set(follows, Quota::sliding_window_counter(5, DAY)?);
    let raised = server.refusal_after(FOLLOW, "alice", 2).await;
    assert_eq!(raised.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(quota_shown(&raised), 5);
    Ok(())
}

#[tokio::test]
async fn a_typed_limit_given_a_concurrency_quota_answers_500_and_holds_no_slot()
-> Result<(), Box<dyn std::error::Error>> {
    let registry = QuotaRegistry::new();
    let server = Server::start(chirp(&registry)).await;
    registry.set(RuleId::new(FollowsPerDay::ID)?, Quota::concurrency(1)?);
    for _ in 0..3 {
        let reply = server.post_as(FOLLOW, "alice").await;
        assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    }
    Ok(())
}

#[tokio::test]
async fn a_router_without_tollgate_answers_500_and_the_rejection_is_not_configured() {
    let server = Server::start(routes()).await;

    // Each answer (rather than a dropped connection) shows no handler panicked; an anonymous
    // caller is not mistaken for "no key".
    for path in [FOLLOW, FOLLOW_OR_SIGN_UP] {
        let signed_in = server.post_as(path, "alice").await;
        assert_eq!(
            signed_in.status,
            StatusCode::INTERNAL_SERVER_ERROR,
            "{path}"
        );
    }
    let anonymous = server.post_anonymously(FOLLOW_OR_SIGN_UP).await;
    assert_eq!(anonymous.status, StatusCode::INTERNAL_SERVER_ERROR);

    let (mut parts, ()) = Request::new(()).into_parts();
    let extracted = <Limiter as FromRequestParts<()>>::from_request_parts(&mut parts, &()).await;
    let Err(rejection) = extracted else {
        panic!("a Limiter without a Tollgate extension");
    };
    assert!(rejection.is_not_configured(), "{rejection}");
    assert!(!rejection.is_refused());
    assert_eq!(
        rejection.into_response().status(),
        StatusCode::INTERNAL_SERVER_ERROR
    );
}

#[tokio::test]
async fn an_optional_limit_is_none_for_anonymous_callers_and_never_for_refused_ones() {
    let server = Server::start(fixed_chirp()).await;

    let anonymous = server.post_anonymously(FOLLOW_OR_SIGN_UP).await;
    assert_eq!(
        (anonymous.status, anonymous.body.as_str()),
        (StatusCode::OK, "anonymous")
    );
    let signed_in = server.post_as(FOLLOW_OR_SIGN_UP, "alice").await;
    assert_eq!(
        (signed_in.status, signed_in.body.as_str()),
        (StatusCode::OK, "followed")
    );

    let refused = server.refusal_after(FOLLOW, "alice", 399).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    let refused = server.post_as(FOLLOW_OR_SIGN_UP, "alice").await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS, "{refused:?}");
    assert_eq!(refused.problem()["policy"], "follows-per-day");
}

#[tokio::test]
async fn limits_checked_together_are_all_or_nothing() -> Result<(), Box<dyn std::error::Error>> {
    let registry = QuotaRegistry::new();
    let server = Server::start(chirp(&registry)).await;
    let remaining = |reply: &Reply, policy: &str| reply.policy("ratelimit", policy).param("r");

    // Alice takes the hour's only global invite; Bob's invites are refused by the global limit.
    assert_eq!(
        server.post_as(INVITES, "alice").await.status,
        StatusCode::OK
    );
    for _ in 0..3 {
        let refused = server.post_as(INVITES, "bob").await;
        assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.problem()["policy"], "invites-global");
    }

    // With room made, Bob's counts show that none of the refused checks charged either limit.
    registry.set(
        RuleId::new(InvitesGlobal::ID)?,
        Quota::fixed_window(100, HOUR)?,
    );
    let invited = server.post_as(INVITES, "bob").await;
    assert_eq!(invited.status, StatusCode::OK);
    assert_eq!(remaining(&invited, InvitesPerAccount::ID), 4);
    assert_eq!(remaining(&invited, InvitesGlobal::ID), 98);
    Ok(())
}

#[tokio::test]
async fn a_failing_store_makes_a_closed_limit_answer_503_and_an_open_limit_pass() {
    let server = Server::start(app(Tollgate::new(DownStore))).await;

    let login = server.login("alice", "wrong").await;
    assert_eq!(login.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(login.retry_after_secs() >= 1, "{login:?}");
    assert_eq!(
        login.problem()["type"],
        "urn:tollgate:problem:limiter-unavailable"
    );

    let follow = server.post_as(FOLLOW, "alice").await;
    assert_eq!(
        (follow.status, follow.body.as_str()),
        (StatusCode::OK, "followed")
    );
}

#[tokio::test]
async fn an_open_limit_let_through_uncounted_by_a_fallback_discloses_nothing() {
    let store = FallbackStore::builder(DownStore).build();
    let server = Server::start(app(Tollgate::new(store))).await;
    let follow = server.post_as(FOLLOW, "alice").await;
    assert_eq!(
        (follow.status, follow.body.as_str()),
        (StatusCode::OK, "followed")
    );
    assert!(
        !follow.headers.contains_key("ratelimit"),
        "nothing was counted, so no count is claimed: {:?}",
        follow.headers
    );
}

/// A read-only typed limit that fails closed answers 503 when the store is down, as an
/// enforcing one does.
#[tokio::test]
async fn a_read_only_limit_that_fails_closed_answers_503_when_the_store_is_down() {
    struct Gate;
    impl Limit for Gate {
        const ID: &'static str = "gate-limit";
        fn default_quota() -> Result<Quota, QuotaError> {
            Quota::token_bucket(1, tollgate_core::Rate::per_hour(1))
        }
        fn mode() -> Mode {
            Mode::ReadOnly
        }
        fn on_store_failure() -> OnStoreFailure {
            OnStoreFailure::Closed
        }
    }
    async fn gated(limiter: Limiter) -> Result<&'static str, LimitRejection> {
        limiter.check::<Gate>(&Key::new("u")).await?;
        Ok("handler ran")
    }
    let app = Router::new()
        .route("/gated", post(gated))
        .layer(Extension(Tollgate::new(DownStore)));
    let server = Server::start(app).await;
    let reply = server.post_anonymously("/gated").await;
    assert_eq!(
        reply.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        reply.body
    );
}
