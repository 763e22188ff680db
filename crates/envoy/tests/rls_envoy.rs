//! The rate limit service behind a real Envoy 1.40: its `envoy.filters.http.ratelimit` filter,
//! asking the `tollgate-envoy` binary (a real process, on a rule file it follows), in front of
//! an axum upstream — what Envoy's clients see.
//!
//! * past the limit: 429 with `x-envoy-ratelimited`, our problem body and `content-type`, our
//!   IETF `RateLimit` / `RateLimit-Policy` fields (and `Retry-After`), and Envoy's own
//!   `X-RateLimit-*` made from our statuses, none dropped or doubled;
//! * our service down: Envoy's `failure_mode_deny` decides (200 through, or 503);
//! * a rule file rewritten while Envoy runs: the new limit in force, Envoy untouched;
//! * one rule file, one Redis: an axum service limited in-process and an Envoy route count one
//!   caller together, under one stored key, the per-address rule's;
//! * Redis paused: a `closed` rule answers 503 through Envoy, an `open` rule 200.
//!
//! Every wait is on state (asking again until an answer changes, a bounded number of times),
//! never on a clock.

mod common;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use common::binary::{Running, write};
use common::upstream::{Upstream, client};
use reqwest::header::HeaderMap;
use tokio::net::TcpListener;
use tollgate_config::{Extractors, RuleFile, RuleWatcher};
use tollgate_envoy_harness::{Action, Envoy, EnvoyConfig, RateLimitFilter};
use tollgate_redis::RedisStore;
use tollgate_redis_harness::RedisServer;
use tollgate_tower::RateLimitLayer;

/// Each address 3 a minute: a bucket of 3, a token back every 20 s, so no token comes back
/// while a test asks.
const PER_ADDRESS: &str = r#"
[[rule]]
id = "per-address"
envoy = { domain = "edge", descriptor = [{ key = "remote_address" }] }
algorithm = "token_bucket"
capacity = 3
refill = { amount = 3, per = "1m" }
"#;

/// How many times a test asks again while it waits on a change, and how long between.
const POLLS: usize = 500;
const POLL_EVERY: Duration = Duration::from_millis(20);

/// The binary serving a rule file in a temporary directory.
struct Serving {
    _dir: tempfile::TempDir,
    path: PathBuf,
    binary: Running,
}

/// `tollgate-envoy serve` on `rules` (written to a file it follows), with `args`.
fn serving(rules: &str, args: &[&str]) -> Serving {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("rules.toml");
    write(&path, rules);
    let mut all = vec!["--rules", path.to_str().expect("utf-8"), "--drain", "100ms"];
    all.extend_from_slice(args);
    let binary = Running::start(&all);
    Serving {
        _dir: dir,
        path,
        binary,
    }
}

/// Envoy in front of a new upstream, its rate limit filter (domain `edge`, set up by
/// `filter`) asking the service on `service` with one descriptor of `actions`.
async fn envoy_asking(
    service: SocketAddr,
    filter: impl FnOnce(RateLimitFilter) -> RateLimitFilter,
    actions: impl IntoIterator<Item = Action>,
) -> (Envoy, Upstream) {
    let upstream = Upstream::start().await;
    let config = EnvoyConfig::new(upstream.address())
        .rate_limit_filter(filter(RateLimitFilter::new("edge", service)))
        .rate_limit(actions);
    let envoy = Envoy::start(&config).unwrap_or_else(|error| panic!("{error}"));
    (envoy, upstream)
}

/// One answer: its status, headers and body.
struct Answer {
    status: u16,
    headers: HeaderMap,
    body: String,
}

impl Answer {
    /// The value of `name`, which must be there exactly once.
    fn one(&self, name: &str) -> &str {
        let values: Vec<_> = self.headers.get_all(name).iter().collect();
        assert_eq!(values.len(), 1, "{name} once in {:?}", self.headers);
        values[0].to_str().expect("an ASCII value")
    }

    /// The value of `name` as a number.
    fn number(&self, name: &str) -> u64 {
        self.one(name).parse().expect("a number")
    }

    /// The `t` parameter of the `RateLimit` field: seconds until the quota is whole.
    fn ratelimit_t(&self) -> u64 {
        let field = self.one("ratelimit");
        let t = field.split(';').find_map(|part| part.strip_prefix("t="));
        t.and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("no t in {field:?}"))
    }
}

/// `GET url` with `headers`.
async fn get_from(client: &reqwest::Client, url: &str, headers: &[(&str, &str)]) -> Answer {
    let mut request = client.get(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("an answer");
    let (status, headers) = (response.status().as_u16(), response.headers().clone());
    let body = response.text().await.expect("a body");
    Answer {
        status,
        headers,
        body,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_limit_envoy_answers_429_with_our_fields_and_body_and_its_own_fields() {
    let serving = serving(PER_ADDRESS, &[]);
    let (envoy, upstream) = envoy_asking(
        serving.binary.grpc,
        |filter| filter.x_ratelimit_headers(true),
        [Action::remote_address()],
    )
    .await;
    let (client, url) = (client(), format!("{}/feed", envoy.url()));

    for left in [2, 1, 0] {
        let answer = get_from(&client, &url, &[]).await;
        assert_eq!((answer.status, answer.body.as_str()), (200, "hello"));
        // Ours, from `response_headers_to_add`, on the upstream's answer.
        assert_eq!(answer.one("ratelimit-policy"), r#""per-address";q=3;w=60"#);
        let field = answer.one("ratelimit");
        assert!(
            field.starts_with(&format!(r#""per-address";r={left};t="#)),
            "{field}"
        );
        // Envoy's own, from our statuses: our rule's id as the limit's name, and the same
        // time to reset as our field's `t`.
        assert_eq!(
            answer.one("x-ratelimit-limit"),
            r#"3, 3;w=60;name="per-address""#
        );
        assert_eq!(answer.number("x-ratelimit-remaining"), left);
        assert_eq!(answer.number("x-ratelimit-reset"), answer.ratelimit_t());
        for absent in ["x-envoy-ratelimited", "retry-after"] {
            assert!(!answer.headers.contains_key(absent), "{absent}");
        }
        // The upstream's own content type, untouched.
        assert_eq!(answer.one("content-type"), "text/plain; charset=utf-8");
    }

    let refused = get_from(&client, &url, &[]).await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.one("x-envoy-ratelimited"), "true");
    // Our content type replaces the `text/plain` of Envoy's local reply (not added beside it),
    // and the body is our problem, as we sent it.
    assert_eq!(refused.one("content-type"), "application/problem+json");
    assert_eq!(
        refused.number("content-length"),
        u64::try_from(refused.body.len()).expect("a length")
    );
    let problem: serde_json::Value = serde_json::from_str(&refused.body).expect("a problem");
    assert_eq!(problem["type"], "urn:tollgate:problem:rate-limited");
    assert_eq!(problem["status"], 429);
    assert_eq!(problem["policy"], "per-address");
    let retry_after = refused.number("retry-after");
    assert_eq!(problem["retry_after"], retry_after);
    assert!(
        (1..=20).contains(&retry_after),
        "a token every 20 s: {retry_after}"
    );
    assert_eq!(refused.one("ratelimit-policy"), r#""per-address";q=3;w=60"#);
    assert!(
        refused
            .one("ratelimit")
            .starts_with(r#""per-address";r=0;t="#)
    );
    assert_eq!(
        refused.one("x-ratelimit-limit"),
        r#"3, 3;w=60;name="per-address""#
    );
    assert_eq!(refused.number("x-ratelimit-remaining"), 0);
    assert_eq!(refused.number("x-ratelimit-reset"), refused.ratelimit_t());

    assert_eq!(upstream.served(), 3);
    let counter = |name| {
        envoy
            .counter(name)
            .unwrap_or_else(|error| panic!("{error}"))
    };
    assert_eq!(counter("cluster.upstream.ratelimit.ok"), 3);
    assert_eq!(counter("cluster.upstream.ratelimit.over_limit"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_our_service_killed_envoys_failure_mode_decides_200_through_or_503() {
    let mut serving = serving(&PER_ADDRESS.replace("3", "1000"), &[]);
    let service = serving.binary.grpc;
    let (open, open_upstream) =
        envoy_asking(service, |filter| filter, [Action::remote_address()]).await;
    let (closed, closed_upstream) = envoy_asking(
        service,
        |filter| filter.failure_mode_deny(true).status_on_error(503),
        [Action::remote_address()],
    )
    .await;
    let client = client();
    let (open_url, closed_url) = (
        format!("{}/feed", open.url()),
        format!("{}/feed", closed.url()),
    );
    assert_eq!(get_from(&client, &open_url, &[]).await.status, 200);
    assert_eq!(get_from(&client, &closed_url, &[]).await.status, 200);

    serving.binary.kill();

    let through = get_from(&client, &open_url, &[]).await;
    assert_eq!((through.status, through.body.as_str()), (200, "hello"));
    let refused = get_from(&client, &closed_url, &[]).await;
    assert_eq!(refused.status, 503, "Envoy's log:\n{}", closed.log());
    assert!(!refused.headers.contains_key("x-envoy-ratelimited"));
    assert_eq!((open_upstream.served(), closed_upstream.served()), (2, 1));
    let counter = |envoy: &Envoy, name| {
        envoy
            .counter(name)
            .unwrap_or_else(|error| panic!("{error}"))
    };
    assert_eq!(counter(&open, "cluster.upstream.ratelimit.error"), 1);
    assert_eq!(
        counter(&open, "cluster.upstream.ratelimit.failure_mode_allowed"),
        1
    );
    assert_eq!(counter(&closed, "cluster.upstream.ratelimit.error"), 1);
    assert_eq!(
        counter(&closed, "cluster.upstream.ratelimit.failure_mode_allowed"),
        0
    );
}

/// Each address `limit` a day, in a fixed window (a refusal counts nothing, so the limit's
/// change finds the count the allowed requests left; no window ends while a test asks, unless
/// it asks across midnight UTC).
fn daily(limit: u64) -> String {
    format!(
        "[[rule]]\nid = \"per-address\"\nenvoy = {{ domain = \"edge\", descriptor = [{{ key = \"remote_address\" }}] }}\nalgorithm = \"fixed_window\"\nlimit = {limit}\nwindow = \"1d\"\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_file_rewritten_is_in_force_through_envoy_without_restarting_it() {
    let serving = serving(&daily(1), &[]);
    let (envoy, upstream) = envoy_asking(
        serving.binary.grpc,
        |filter| filter.x_ratelimit_headers(true),
        [Action::remote_address()],
    )
    .await;
    let envoy_pid = envoy.pid();
    let (client, url) = (client(), format!("{}/feed", envoy.url()));
    let first = get_from(&client, &url, &[]).await;
    assert_eq!(first.status, 200);
    assert_eq!(
        first.one("x-ratelimit-limit"),
        r#"1, 1;w=86400;name="per-address""#
    );
    assert_eq!(get_from(&client, &url, &[]).await.status, 429);

    write(&serving.path, &daily(100));
    // Ask again until the new limit shows; refusals under the old one count nothing.
    let mut answer = get_from(&client, &url, &[]).await;
    for _ in 0..POLLS {
        if answer.one("x-ratelimit-limit").starts_with("100, ") {
            break;
        }
        tokio::time::sleep(POLL_EVERY).await;
        answer = get_from(&client, &url, &[]).await;
    }
    assert_eq!(
        answer.one("x-ratelimit-limit"),
        r#"100, 100;w=86400;name="per-address""#,
        "the change is not in force"
    );
    assert_eq!(answer.status, 200);
    // The count carried over: the first request, and this one.
    assert_eq!(answer.number("x-ratelimit-remaining"), 98);
    assert_eq!(
        answer.one("ratelimit-policy"),
        r#""per-address";q=100;w=86400"#
    );
    assert_eq!(upstream.served(), 2);
    assert_eq!(envoy.pid(), envoy_pid, "the same Envoy");
    assert!(envoy.is_running());
}

/// One rule for an axum service's `/api/` routes (by peer address) and for Envoy's requests
/// (by `remote_address`): 4 an hour, a token back every 15 minutes.
const SHARED: &str = r#"
[[rule]]
id = "api-per-address"
match = { path = "/api/{*rest}" }
key = "peer_ip"
envoy = { domain = "edge", descriptor = [{ key = "remote_address" }] }
algorithm = "token_bucket"
capacity = 4
refill = { amount = 4, per = "1h" }
"#;

/// An axum service with `/api/{*rest}` behind `layer`, served on 127.0.0.1:0 with the peer's
/// address (what `peer_ip` reads): its URL.
async fn limited_api(layer: RateLimitLayer<RedisStore>) -> String {
    let app = Router::new()
        .route("/api/{*rest}", get(|| async { "api" }))
        .layer(layer);
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .expect("bind the api");
    let address = listener.local_addr().expect("the api's address");
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
    });
    format!("http://{address}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_axum_service_and_an_envoy_route_count_one_caller_together_in_one_redis() {
    let redis = RedisServer::start().expect("start redis-server");
    let prefix = "shared";
    // Deadlines a busy machine's Redis meets: a call that missed one would pass uncounted
    // (the rule's `on_store_failure` is `open`), and the counts below would be off.
    let serving = serving(
        SHARED,
        &[
            "--redis",
            &redis.url(),
            "--redis-prefix",
            prefix,
            "--store-timeout",
            "2s",
        ],
    );
    let store = RedisStore::builder()
        .prefix(prefix)
        .connect(&redis.url())
        .await
        .expect("connect to redis-server");
    let layer = RateLimitLayer::new(store.clone());
    // The same file the binary follows, followed here too.
    let _watcher = RuleWatcher::start(&serving.path, Extractors::new(), &layer)
        .unwrap_or_else(|error| panic!("{error}"));
    let api = format!("{}/api/feed", limited_api(layer).await);
    let (envoy, upstream) = envoy_asking(
        serving.binary.grpc,
        |filter| {
            filter
                .x_ratelimit_headers(true)
                .timeout(Duration::from_secs(5))
        },
        [Action::remote_address()],
    )
    .await;
    let (client, edge) = (client(), format!("{}/api/feed", envoy.url()));

    // Turn about, one count: each answer's `RateLimit` field says what is left of the 4.
    let mut seen = Vec::new();
    for (url, left) in [(&api, 3), (&edge, 2), (&api, 1), (&edge, 0)] {
        let answer = get_from(&client, url, &[]).await;
        assert_eq!(answer.status, 200, "{url}: {}", answer.body);
        let field = answer.one("ratelimit");
        assert!(
            field.starts_with(&format!(r#""api-per-address";r={left};t="#)),
            "{url}: {field}"
        );
        seen.push(answer.body);
    }
    assert_eq!(seen, ["api", "hello", "api", "hello"]);
    let from_axum = get_from(&client, &api, &[]).await;
    assert_eq!(from_axum.status, 429, "the axum service refuses the 5th");
    assert_eq!(
        from_axum.one("ratelimit-policy"),
        r#""api-per-address";q=4;w=3600"#
    );
    let from_envoy = get_from(&client, &edge, &[]).await;
    assert_eq!(from_envoy.status, 429, "Envoy refuses the 5th");
    assert_eq!(from_envoy.one("x-envoy-ratelimited"), "true");
    assert_eq!(from_envoy.number("x-ratelimit-remaining"), 0);
    assert_eq!(upstream.served(), 2);

    // One stored key holds it all: the per-address rule's, for the caller 127.0.0.1 — the key
    // both the HTTP layer's `peer_ip` and the descriptor's `remote_address` make of that
    // address (its bytes, escaped: `%7F%00%00%01`).
    let file = RuleFile::parse("rules.toml", SHARED, &Extractors::new())
        .unwrap_or_else(|errors| panic!("{errors}"));
    let found = file.descriptor_rules().next().expect("the rule");
    let rule = found.rule().expect("a limited rule");
    let key = rule.key_of_values(&["127.0.0.1"]).expect("a key");
    let expected = store
        .stored_key(found.id(), &key, rule.quota().algorithm())
        .expect("a stored key");
    let keys = redis
        .cli(&["--scan", "--pattern", &format!("{prefix}:*")])
        .expect("redis-cli --scan");
    assert_eq!(
        keys.split_whitespace().collect::<Vec<_>>(),
        [expected.as_str()]
    );
    assert!(
        expected.starts_with("shared:") && expected.contains("{api-per-address:"),
        "{expected}"
    );
    // The address is the key, not the rule alone: another caller's is another key.
    let other = rule.key_of_values(&["203.0.113.7"]).expect("a key");
    let elsewhere = store.stored_key(found.id(), &other, rule.quota().algorithm());
    assert_ne!(elsewhere.as_deref(), Some(expected.as_str()));
}

/// Two rules for a descriptor `[("mode", ...)]`: the one for `closed` refuses when the store
/// cannot answer, the one for `open` lets the request through.
const FAILING: &str = r#"
[[rule]]
id = "fails-closed"
envoy = { domain = "edge", descriptor = [{ key = "mode", value = "closed" }] }
algorithm = "token_bucket"
capacity = 1000
refill = { amount = 1000, per = "1h" }
on_store_failure = "closed"

[[rule]]
id = "fails-open"
envoy = { domain = "edge", descriptor = [{ key = "mode", value = "open" }] }
algorithm = "token_bucket"
capacity = 1000
refill = { amount = 1000, per = "1h" }
on_store_failure = "open"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_paused_a_closed_rule_answers_503_through_envoy_and_an_open_rule_200() {
    let redis = RedisServer::start().expect("start redis-server");
    // The store's deadline well inside Envoy's: the answer comes back before Envoy gives up.
    let serving = serving(
        FAILING,
        &[
            "--redis",
            &redis.url(),
            "--redis-prefix",
            "paused",
            "--store-timeout",
            "50ms",
            "--metrics",
            "127.0.0.1:0",
        ],
    );
    let (envoy, upstream) = envoy_asking(
        serving.binary.grpc,
        |filter| {
            filter
                .failure_mode_deny(true)
                .status_on_error(503)
                .timeout(Duration::from_secs(1))
        },
        [Action::request_header("x-mode", "mode")],
    )
    .await;
    let (client, url) = (client(), format!("{}/feed", envoy.url()));
    let closed = [("x-mode", "closed")];
    let open = [("x-mode", "open")];
    // Redis answering through the binary first: its first call loads the script, and on a busy
    // machine may miss the 50 ms (then the closed rule answers 503, and the breaker may hold a
    // moment).
    assert_eq!(until_200(&client, &url, &closed).await, 200);
    assert_eq!(get_from(&client, &url, &open).await.status, 200);
    let counter = |name| {
        envoy
            .counter(name)
            .unwrap_or_else(|error| panic!("{error}"))
    };
    let metrics = serving.binary.metrics.expect("a metrics address");
    let (errors, oks, served) = (
        counter("cluster.upstream.ratelimit.error"),
        counter("cluster.upstream.ratelimit.ok"),
        upstream.served(),
    );
    let unavailable = answered(metrics, "unavailable").await;

    redis.pause().expect("SIGSTOP redis-server");
    let refused = get_from(&client, &url, &closed).await;
    let through = get_from(&client, &url, &open).await;
    redis.resume().expect("SIGCONT redis-server");

    assert_eq!(refused.status, 503, "Envoy's log:\n{}", envoy.log());
    assert_eq!((through.status, through.body.as_str()), (200, "hello"));
    assert_eq!(counter("cluster.upstream.ratelimit.error"), errors + 1);
    assert_eq!(counter("cluster.upstream.ratelimit.ok"), oks + 1);
    assert_eq!(upstream.served(), served + 1);
    // The 503 is Envoy's `status_on_error` for our answer, UNAVAILABLE, given in time (not a
    // timeout of Envoy's, which our service would not have counted).
    assert_eq!(answered(metrics, "unavailable").await, unavailable + 1);

    // Redis back: the closed rule answers again (once the store's breaker lets it try).
    assert_eq!(
        until_200(&client, &url, &closed).await,
        200,
        "the closed rule never answered again"
    );
}

/// Asks `GET url` with `headers` until it answers 200, a bounded number of times: the last
/// status.
async fn until_200(client: &reqwest::Client, url: &str, headers: &[(&str, &str)]) -> u16 {
    let mut status = get_from(client, url, headers).await.status;
    for _ in 0..POLLS {
        if status == 200 {
            break;
        }
        tokio::time::sleep(POLL_EVERY).await;
        status = get_from(client, url, headers).await.status;
    }
    status
}

/// How many answers of `code` the binary's `/metrics` on `metrics` counts.
async fn answered(metrics: SocketAddr, code: &str) -> u64 {
    let text = client()
        .get(format!("http://{metrics}/metrics"))
        .send()
        .await
        .expect("scrape")
        .text()
        .await
        .expect("a body");
    let line = format!("tollgate_envoy_answers_total{{code=\"{code}\"}} ");
    text.lines()
        .find_map(|found| found.strip_prefix(line.as_str()))
        .map_or(0, |count| count.trim().parse().expect("a count"))
}
