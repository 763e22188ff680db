//! The Chirp gateway's rate-limit table, every row whose key comes from the request, built with
//! one `RateLimitLayer` and driven to at least one refusal per row.

mod common;

use std::convert::Infallible;
use std::error::Error;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, Method, Request, Response, StatusCode};
use http_body_util::Empty;
use tollgate_core::{MemoryStore, Quota, Rate, Timestamp};
use tollgate_testing::ManualClock;
use tollgate_tower::client_ip::IpGrouping;
use tollgate_tower::key::{ClientIp, ExtensionKey, Global, HeaderKey};
use tollgate_tower::{RateLimitLayer, ResponseBody, Rule};
use tower::{Layer, Service, ServiceExt, service_fn};

/// What the gateway answers.
type Reply = Response<ResponseBody<Empty<Bytes>>>;

/// The account an authentication middleware inserted.
#[derive(Debug, Clone)]
struct Account(String);

const DAY: Duration = Duration::from_secs(86_400);
const HOUR: Duration = Duration::from_secs(3600);
const SECOND: Duration = Duration::from_secs(1);

/// Day-aligned, so every window starts here and holds its whole limit.
const START: Timestamp = Timestamp::from_secs(20_000 * 86_400);

/// The table, as one layer over a memory store on `clock` (laid out as the table it is).
#[rustfmt::skip]
fn chirp_layer(clock: ManualClock) -> Result<RateLimitLayer<MemoryStore<ManualClock>>, Box<dyn Error>> {
    let account = || ExtensionKey::new(|account: &Account| account.0.clone());
    let header = |name| HeaderKey::new(HeaderName::from_static(name));
    let ip_block = ClientIp::peer().grouping(IpGrouping::default().with_ipv4_prefix(24)?);
    let reads     = Rule::new("reads",     Quota::token_bucket(50, Rate::per_second(10))?, account())?;
    let posting   = Rule::new("posting",   Quota::token_bucket(5, Rate::per_hour(30))?,    account())?;
    let following = Rule::new("following", Quota::sliding_window_counter(400, DAY)?,       account())?;
    let device    = Rule::new("signups-per-device",   Quota::fixed_window(3, DAY)?,  header("x-device-id"))?;
    let block     = Rule::new("signups-per-ip-block", Quota::fixed_window(20, HOUR)?, ip_block)?;
    let partner   = Rule::new("partner-api", Quota::token_bucket(200, Rate::per_second(200))?, header("x-api-key"))?;
    let otp       = Rule::new("otp-global",  Quota::fixed_window(2_000, SECOND)?,              Global)?;
    Ok(RateLimitLayer::new(MemoryStore::builder().clock(clock).build())
        .route(Method::GET,  "/feed",              reads.clone())?
        .route(Method::GET,  "/profiles/{id}",     reads)?
        .route(Method::POST, "/posts",             posting)?
        .route(Method::POST, "/users/{id}/follow", following)?
        .route(Method::POST, "/signup",            device)?
        .route(Method::POST, "/signup",            block)?
        .any_method(         "/partner/{*rest}",   partner)?
        .route(Method::POST, "/otp",               otp)?)
}

/// The gateway over a cheap inner service, and the store's clock.
fn chirp() -> (
    impl Service<Request<()>, Response = Reply, Error = Infallible> + Clone,
    ManualClock,
) {
    let clock = ManualClock::new(START);
    let layer = chirp_layer(clock.clone()).expect("the table builds");
    let inner = service_fn(|_: Request<()>| async {
        Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
    });
    (layer.layer(inner), clock)
}

/// A request from `peer` with `headers`.
fn request(method: Method, path: &str, peer: [u8; 4], headers: &[(&str, &str)]) -> Request<()> {
    let mut builder = Request::builder().method(method).uri(path);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let mut request = builder.body(()).expect("a valid request");
    request
        .extensions_mut()
        .insert(SocketAddr::from((peer, 40_000)));
    request
}

/// A request signed in as `account`, from a peer in 203.0.113.0/24.
fn signed_in(method: Method, path: &str, account: &str) -> Request<()> {
    let mut request = request(method, path, [203, 0, 113, 7], &[]);
    request.extensions_mut().insert(Account(account.to_owned()));
    request
}

/// Sends `request` through a clone of `service`.
async fn send(
    service: &(impl Service<Request<()>, Response = Reply, Error = Infallible> + Clone),
    request: Request<()>,
) -> Reply {
    let response = service.clone().oneshot(request).await;
    response.unwrap_or_else(|never| match never {})
}

/// The policy names in the `RateLimit` field, in order, parsed as an RFC 8941 List.
fn policies(response: &Reply) -> Vec<String> {
    let Some(value) = response.headers().get("ratelimit") else {
        return Vec::new();
    };
    common::sf_members("ratelimit", value)
        .into_iter()
        .map(|member| member.name)
        .collect()
}

/// Sends `limit` requests (`make` builds each from its index) that must all pass, then one more
/// that `policy` must refuse: a 429 whose `RateLimit` field names `policy` first.
async fn exhaust(
    service: &(impl Service<Request<()>, Response = Reply, Error = Infallible> + Clone),
    policy: &str,
    limit: usize,
    make: impl Fn(usize) -> Request<()>,
) {
    for index in 0..limit {
        let response = send(service, make(index)).await;
        assert_eq!(
            response.status(),
            StatusCode::OK,
            "{policy}: request {index}"
        );
    }
    let refused = send(service, make(limit)).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS, "{policy}");
    assert_eq!(policies(&refused).first().map(String::as_str), Some(policy));
}

#[tokio::test]
async fn reads_allow_bursts_of_50_then_10_a_second_per_account() {
    let (chirp, clock) = chirp();
    // /feed and /profiles/{id} share one count.
    let read = |index: usize| match index % 2 {
        0 => signed_in(Method::GET, "/feed", "reader"),
        _ => signed_in(Method::GET, &format!("/profiles/{index}"), "reader"),
    };
    exhaust(&chirp, "reads", 50, read).await;
    clock.advance(Duration::from_secs(1));
    exhaust(&chirp, "reads", 10, read).await;
    // Another account has its own bucket.
    exhaust(&chirp, "reads", 50, |_| {
        signed_in(Method::GET, "/feed", "other")
    })
    .await;
}

#[tokio::test]
async fn posting_allows_bursts_of_5_and_30_an_hour_per_account() {
    let (chirp, clock) = chirp();
    let post = |_| signed_in(Method::POST, "/posts", "poster");
    exhaust(&chirp, "posting", 5, post).await;
    // 30 an hour: one more post every two minutes.
    clock.advance(Duration::from_secs(120));
    exhaust(&chirp, "posting", 1, post).await;
}

#[tokio::test]
async fn following_allows_400_a_day_per_account() {
    let (chirp, _clock) = chirp();
    exhaust(&chirp, "following", 400, |index| {
        signed_in(Method::POST, &format!("/users/{index}/follow"), "follower")
    })
    .await;
}

#[tokio::test]
async fn signups_allow_3_per_device_a_day() {
    let (chirp, _clock) = chirp();
    let signup = |device: &str| {
        request(
            Method::POST,
            "/signup",
            [192, 0, 2, 1],
            &[("x-device-id", device)],
        )
    };
    exhaust(&chirp, "signups-per-device", 3, |_| signup("device-1")).await;
    let other_device = send(&chirp, signup("device-2")).await;
    assert_eq!(other_device.status(), StatusCode::OK);
}

#[tokio::test]
async fn signups_allow_20_per_ip_block_an_hour() {
    let (chirp, _clock) = chirp();
    // A new device and a new address each time, all in 198.51.100.0/24.
    exhaust(&chirp, "signups-per-ip-block", 20, |index| {
        let device = format!("device-{index}");
        let host = u8::try_from(index + 1).expect("a host number");
        request(
            Method::POST,
            "/signup",
            [198, 51, 100, host],
            &[("x-device-id", &device)],
        )
    })
    .await;
    let next_block = request(
        Method::POST,
        "/signup",
        [198, 51, 101, 1],
        &[("x-device-id", "new")],
    );
    assert_eq!(send(&chirp, next_block).await.status(), StatusCode::OK);
}

#[tokio::test]
async fn the_partner_api_allows_200_a_second_per_key_on_any_method() {
    let (chirp, clock) = chirp();
    let methods = [Method::GET, Method::POST, Method::DELETE];
    let call = |index: usize, key: &str| {
        let method = methods[index % methods.len()].clone();
        request(
            method,
            "/partner/v1/things",
            [192, 0, 2, 9],
            &[("x-api-key", key)],
        )
    };
    exhaust(&chirp, "partner-api", 200, |index| call(index, "key-a")).await;
    assert_eq!(
        send(&chirp, call(0, "key-b")).await.status(),
        StatusCode::OK
    );
    clock.advance(Duration::from_millis(500));
    exhaust(&chirp, "partner-api", 100, |index| call(index, "key-a")).await;
}

#[tokio::test]
async fn otp_is_capped_at_2000_a_second_for_everyone() {
    let (chirp, clock) = chirp();
    // Different callers, one count.
    let otp = |index: usize| {
        let host = u8::try_from(index % 250).expect("a host number");
        request(Method::POST, "/otp", [192, 0, 2, host], &[])
    };
    exhaust(&chirp, "otp-global", 2_000, otp).await;
    clock.advance(Duration::from_secs(1));
    exhaust(&chirp, "otp-global", 2_000, otp).await;
}
