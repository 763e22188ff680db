//! Fleet-wide rule changes through a real redis-server (and a real cluster): gateways — each an
//! axum server with its own rule file and its own Redis connection — follow one published
//! document, over real HTTP.

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use tollgate::MemoryStore;
use tollgate::config::{Extractors, RuleWatcher};
use tollgate::published::{
    DocumentRefusal, PublishError, PublishedRules, PublishedRulesError, PublishedRulesStatus,
};
use tollgate::redis::{RedisConnection, RedisStore};
use tollgate::tower::RateLimitLayer;
use tollgate_redis_harness::{RedisCluster, RedisServer};

const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

/// One global rule `reads` allowing `limit` a day (one rule file, or one fleet document).
fn reads(limit: u64) -> String {
    format!(
        "[[rule]]\nid = \"reads\"\nalgorithm = \"fixed_window\"\nlimit = {limit}\nwindow = \"1d\"\nkey = \"global\"\n"
    )
}

/// A gateway: its rule file (`reads(1000)`), its layer over Redis, a server, and its fleet
/// follower.
struct Gateway {
    url: String,
    watcher: RuleWatcher,
    fleet: PublishedRules,
    _dir: tempfile::TempDir,
}

struct Setup<'a> {
    connection: RedisConnection,
    prefix: &'a str,
    name: &'a str,
    poll_every: Duration,
    key: Option<&'a [u8]>,
    max_bytes: usize,
}

impl<'a> Setup<'a> {
    /// A gateway on `connection` counting under `prefix`, following document `chirp` with the
    /// poll an hour away, unsigned, with the default size cap.
    fn new(connection: RedisConnection, prefix: &'a str) -> Setup<'a> {
        Setup {
            connection,
            prefix,
            name: "chirp",
            poll_every: Duration::from_secs(3_600),
            key: None,
            max_bytes: 256 * 1024,
        }
    }

    async fn start(&self) -> Gateway {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path: PathBuf = dir.path().join("rules.toml");
        std::fs::write(&path, reads(1000)).expect("write the rule file");
        let store = RedisStore::builder()
            .prefix(self.prefix)
            .build(self.connection.clone())
            .expect("a valid prefix");
        let layer = RateLimitLayer::new(store);
        let watcher = RuleWatcher::start(&path, Extractors::new(), &layer).expect("a valid file");
        let mut builder = PublishedRules::builder(self.name)
            .poll_every(self.poll_every)
            .max_document_bytes(self.max_bytes);
        if let Some(key) = self.key {
            builder = builder.signing_key(key);
        }
        let fleet = builder
            .follow(&self.connection, watcher.overlay())
            .await
            .expect("a valid name and key");
        let app = Router::new()
            .route("/", get(|| async { "ok" }))
            .layer(layer);
        Gateway {
            url: format!("{}/", common::serve(app).await),
            watcher,
            fleet,
            _dir: dir,
        }
    }
}

async fn standalone(server: &RedisServer) -> RedisConnection {
    RedisConnection::connect(&server.url())
        .await
        .expect("a valid address")
}

/// Waits until `gateway`'s fleet status satisfies `done`, failing after a generous deadline.
async fn wait_for(
    gateway: &Gateway,
    what: &str,
    done: impl Fn(&PublishedRulesStatus) -> bool,
) -> PublishedRulesStatus {
    let started = Instant::now();
    loop {
        let status = gateway.fleet.status();
        if done(&status) {
            return status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "never {what}: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The `reads` limit a gateway's responses announce (`RateLimit-Policy: "reads";q=N;...`).
async fn announced_limit(gateway: &Gateway) -> u64 {
    let response = common::client()
        .get(&gateway.url)
        .send()
        .await
        .expect("the gateway answers");
    let policy = response
        .headers()
        .get("ratelimit-policy")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    policy
        .split(';')
        .find_map(|part| part.strip_prefix("q="))
        .and_then(|limit| limit.parse().ok())
        .unwrap_or_else(|| panic!("no q= in {policy:?}"))
}

async fn status_of(gateway: &Gateway) -> StatusCode {
    let response = common::client().get(&gateway.url).send().await;
    response.expect("the gateway answers").status()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_published_on_one_gateway_is_enforced_by_the_other_through_the_announcement() {
    let server = RedisServer::start().expect("start redis-server");
    let setup = Setup {
        connection: standalone(&server).await,
        prefix: "announce",
        name: "chirp",
        // No poll to speak of: only the pub/sub announcement can bring the change.
        poll_every: Duration::from_secs(3_600),
        key: None,
        max_bytes: 256 * 1024,
    };
    let (first, second) = (setup.start().await, setup.start().await);
    wait_for(&second, "subscribed", |status| status.subscribed).await;
    assert_eq!(announced_limit(&second).await, 1000);

    let version = first.fleet.publish(&reads(3)).await.expect("published");
    assert_eq!(
        first.fleet.status().version,
        Some(version),
        "applied where published"
    );
    wait_for(&second, "applied the document", |status| {
        status.version == Some(version)
    })
    .await;
    assert_eq!(second.watcher.status().overridden, ["reads"]);
    // Enforced: 3 a day in all, counted in the shared Redis (one request above already counted).
    assert_eq!(announced_limit(&second).await, 3);
    assert_eq!(status_of(&first).await, StatusCode::OK);
    assert_eq!(status_of(&second).await, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(status_of(&first).await, StatusCode::TOO_MANY_REQUESTS);

    // Withdrawn: the files' rules again.
    let withdrawn = second.fleet.withdraw().await.expect("withdrawn");
    wait_for(&first, "applied the withdrawal", |status| {
        status.version == Some(withdrawn)
    })
    .await;
    assert!(first.watcher.status().overridden.is_empty());
    assert_eq!(announced_limit(&first).await, 1000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_whose_subscription_is_killed_still_converges() {
    let server = RedisServer::start().expect("start redis-server");
    let setup = Setup {
        poll_every: Duration::from_secs(1),
        ..Setup::new(standalone(&server).await, "killed")
    };
    let (first, second) = (setup.start().await, setup.start().await);
    wait_for(&second, "subscribed", |status| status.subscribed).await;
    wait_for(&first, "subscribed", |status| status.subscribed).await;

    let killed = server
        .cli(&["CLIENT", "KILL", "TYPE", "pubsub"])
        .expect("CLIENT KILL");
    assert_eq!(killed.trim(), "2", "both subscriptions killed");
    let version = first.fleet.publish(&reads(5)).await.expect("published");
    wait_for(&second, "converged", |status| {
        status.version == Some(version)
    })
    .await;
    assert_eq!(announced_limit(&second).await, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_started_after_the_change_starts_with_it() {
    let server = RedisServer::start().expect("start redis-server");
    let setup = Setup {
        key: Some(SECRET),
        ..Setup::new(standalone(&server).await, "late")
    };
    let first = setup.start().await;
    let version = first.fleet.publish(&reads(7)).await.expect("published");

    let late = setup.start().await;
    // `follow` read the document before returning: the first request already sees it.
    assert_eq!(late.fleet.status().version, Some(version));
    assert_eq!(announced_limit(&late).await, 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tampered_signed_document_is_refused_and_the_rules_in_force_stay() {
    let server = RedisServer::start().expect("start redis-server");
    let setup = Setup {
        poll_every: Duration::from_secs(1),
        key: Some(SECRET),
        ..Setup::new(standalone(&server).await, "signed")
    };
    let (first, second) = (setup.start().await, setup.start().await);
    let version = first.fleet.publish(&reads(9)).await.expect("published");
    wait_for(&second, "applied", |status| status.version == Some(version)).await;

    // Someone with write access to Redis but not the key raises the limit.
    let forged = (version + 1).to_string();
    let key = "tollgate:fleet:{chirp}";
    server
        .cli(&["HSET", key, "version", &forged, "body", &reads(1_000_000)])
        .expect("HSET");
    server
        .cli(&["PUBLISH", "tollgate:fleet:chirp", &forged])
        .expect("PUBLISH");
    let status = wait_for(&second, "refused the forgery", |status| {
        status.refused.is_some()
    })
    .await;
    assert!(
        matches!(status.refused, Some((v, DocumentRefusal::BadSignature)) if v.to_string() == forged),
        "{status:?}"
    );
    assert_eq!(status.version, Some(version), "the signed version stays");
    assert_eq!(announced_limit(&second).await, 9);

    // A gateway without the key publishes unsigned: refused by the signed ones too.
    let unsigned = Setup { key: None, ..setup };
    let rogue = unsigned.start().await;
    let rogue_version = rogue.fleet.publish(&reads(50)).await.expect("written");
    let status = wait_for(&second, "refused the unsigned document", |status| {
        status
            .refused
            .as_ref()
            .is_some_and(|(v, _)| *v == rogue_version)
    })
    .await;
    assert!(matches!(
        status.refused,
        Some((_, DocumentRefusal::BadSignature))
    ));
    assert_eq!(announced_limit(&second).await, 9);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_or_oversized_documents_are_refused_whole_and_never_published() {
    let server = RedisServer::start().expect("start redis-server");
    let setup = Setup {
        poll_every: Duration::from_secs(1),
        max_bytes: 4 * 1024,
        ..Setup::new(standalone(&server).await, "bad")
    };
    let gateway = setup.start().await;
    let mistakes = "[[rule]]\nid = \"reads\"\nalgorithm = \"fixed_window\"\nlimit = 0\nwindow = \"1d\"\nkey = \"global\"\n";
    match gateway.fleet.publish(mistakes).await {
        Err(PublishError::Invalid(errors)) => {
            assert!(errors.to_string().contains("fleet document:4:"), "{errors}");
        }
        other => panic!("published a document with mistakes: {other:?}"),
    }
    let huge = format!("{}# {}\n", reads(3), "x".repeat(8 * 1024));
    assert!(matches!(
        gateway.fleet.publish(&huge).await,
        Err(PublishError::TooLarge { .. })
    ));
    assert_eq!(
        gateway.fleet.status().version,
        None,
        "nothing was published"
    );

    // Written behind the publisher's back: refused on arrival, with the line of the mistake.
    let key = "tollgate:fleet:{chirp}";
    server
        .cli(&["HSET", key, "version", "10", "body", mistakes])
        .expect("HSET");
    gateway.fleet.refresh().await;
    let status = gateway.fleet.status();
    match &status.refused {
        Some((10, DocumentRefusal::Invalid(errors))) => {
            assert!(
                errors.to_string().contains("fleet document 10:4:"),
                "{errors}"
            );
        }
        other => panic!("not refused as invalid: {other:?}"),
    }
    assert_eq!(gateway.watcher.status().overlay_version, None);
    server
        .cli(&["HSET", key, "version", "11", "body", &huge])
        .expect("HSET");
    gateway.fleet.refresh().await;
    assert!(matches!(
        gateway.fleet.status().refused,
        Some((11, DocumentRefusal::TooLarge { .. }))
    ));
    assert_eq!(
        announced_limit(&gateway).await,
        1000,
        "the file's rules stay"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_reaches_every_gateway_on_a_redis_cluster() {
    let cluster = RedisCluster::shared().expect("start a redis cluster");
    let urls = cluster.urls();
    let connect = || async {
        RedisConnection::connect_cluster(&urls)
            .await
            .expect("valid addresses")
    };
    let setup = Setup {
        name: "chirp-cluster",
        key: Some(SECRET),
        ..Setup::new(connect().await, "fleet-cluster")
    };
    let first = setup.start().await;
    let other = Setup {
        connection: connect().await,
        ..setup
    };
    let second = other.start().await;
    wait_for(&second, "subscribed", |status| status.subscribed).await;
    let version = first.fleet.publish(&reads(4)).await.expect("published");
    wait_for(&second, "applied", |status| status.version == Some(version)).await;
    assert_eq!(announced_limit(&second).await, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_versions_are_refused_and_hold_nothing_back() {
    let server = RedisServer::start().expect("start redis-server");
    let setup = Setup {
        poll_every: Duration::from_secs(1),
        key: Some(SECRET),
        ..Setup::new(standalone(&server).await, "forged")
    };
    let gateway = setup.start().await;
    let key = "tollgate:fleet:{chirp}";

    // A forged document with the largest version there is: refused, not remembered as newest.
    let largest = u64::MAX.to_string();
    server
        .cli(&[
            "HSET",
            key,
            "version",
            &largest,
            "body",
            &reads(1_000_000),
            "mac",
            "x",
        ])
        .expect("HSET");
    gateway.fleet.refresh().await;
    assert!(matches!(
        gateway.fleet.status().refused,
        Some((_, DocumentRefusal::BadVersion(_)))
    ));
    // A publisher does not build on it: a clear error, nothing written.
    match gateway.fleet.publish(&reads(6)).await {
        Err(PublishError::BadVersion(version)) => assert_eq!(version, largest),
        other => panic!("published over a forged version: {other:?}"),
    }
    // Once the key is deleted, the next document is applied.
    server.cli(&["DEL", key]).expect("DEL");
    let version = gateway.fleet.publish(&reads(6)).await.expect("published");
    assert_eq!(gateway.fleet.status().version, Some(version));
    assert_eq!(announced_limit(&gateway).await, 6);

    // Not a number: refused the same way; the rules in force stay.
    server
        .cli(&["HSET", key, "version", "soon", "body", &reads(1_000_000)])
        .expect("HSET");
    gateway.fleet.refresh().await;
    assert!(matches!(
        gateway.fleet.status().refused,
        Some((0, DocumentRefusal::BadVersion(ref written))) if written == "soon"
    ));
    assert_eq!(announced_limit(&gateway).await, 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_key_after_a_refused_future_version_does_not_freeze_the_fleet() {
    let server = RedisServer::start().expect("start redis-server");
    let setup = Setup {
        key: Some(SECRET),
        ..Setup::new(standalone(&server).await, "lost")
    };
    let (first, second) = (setup.start().await, setup.start().await);
    let key = "tollgate:fleet:{chirp}";
    let year_ahead = (u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_millis(),
    )
    .expect("fits")
        + 365 * 86_400_000)
        .to_string();
    server
        .cli(&[
            "HSET",
            key,
            "version",
            &year_ahead,
            "body",
            &reads(1_000_000),
            "mac",
            "x",
        ])
        .expect("HSET");
    second.fleet.refresh().await;
    assert!(second.fleet.status().refused.is_some());
    // Redis loses the key (a restart without persistence, a failover to an empty replica).
    server.cli(&["DEL", key]).expect("DEL");
    let version = first.fleet.publish(&reads(3)).await.expect("published");
    second.fleet.refresh().await;
    assert_eq!(second.fleet.status().version, Some(version));
    assert_eq!(announced_limit(&second).await, 3);
}

/// A gateway that applied a version an hour ahead (a publisher's clock was fast), after the key
/// is lost: a new publish is lower, ignored there as a rollback, and `publish` says so instead of
/// claiming the document is in force.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_below_the_version_in_force_is_not_reported_in_force() {
    let server = RedisServer::start().expect("start redis-server");
    let gateway = Setup::new(standalone(&server).await, "ahead").start().await;
    let key = "tollgate:fleet:{chirp}";
    let hour_ahead = (u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_millis(),
    )
    .expect("fits")
        + 3_600_000)
        .to_string();
    server
        .cli(&[
            "HSET",
            key,
            "version",
            &hour_ahead,
            "body",
            &reads(5),
            "mac",
            "",
        ])
        .expect("HSET");
    gateway.fleet.refresh().await;
    assert_eq!(
        announced_limit(&gateway).await,
        5,
        "the skewed version is in force"
    );
    server.cli(&["DEL", key]).expect("DEL");
    let published = gateway.fleet.publish(&reads(7)).await;
    assert!(
        matches!(published, Err(PublishError::NotApplied { .. })),
        "published but not in force here: {published:?}"
    );
    assert_eq!(announced_limit(&gateway).await, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_key_is_refused_and_named_and_publishing_says_to_delete_it() {
    let server = RedisServer::start().expect("start redis-server");
    let setup = Setup::new(standalone(&server).await, "corrupt");
    let gateway = setup.start().await;
    let key = "tollgate:fleet:{chirp}";
    for corruption in [
        &["HSET", key, "version", "-1"][..],
        &["HSET", key, "version", "1.5"],
        &["SET", key, "a string"],
    ] {
        server.cli(&["DEL", key]).expect("DEL");
        server.cli(corruption).expect("corrupt the key");
        gateway.fleet.refresh().await;
        let status = gateway.fleet.status();
        assert!(
            matches!(status.refused, Some((_, DocumentRefusal::BadVersion(_)))),
            "{corruption:?}: {status:?}"
        );
        assert_eq!(
            status.last_redis_error, None,
            "not an outage: {corruption:?}"
        );
        assert!(
            matches!(
                gateway.fleet.publish(&reads(3)).await,
                Err(PublishError::BadVersion(_))
            ),
            "{corruption:?}"
        );
    }
    server.cli(&["DEL", key]).expect("DEL");
    let version = gateway.fleet.withdraw().await.expect("withdrawn");
    assert_eq!(gateway.fleet.status().version, Some(version));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishing_checks_what_this_gateway_would_refuse_and_a_short_key_is_refused() {
    let server = RedisServer::start().expect("start redis-server");
    let connection = standalone(&server).await;
    let setup = Setup::new(connection.clone(), "precheck");
    let gateway = setup.start().await;
    // The layer has no QuotaRegistry: a `[[limit]]` cannot apply here, so it is not published.
    let limit = "[[limit]]\nid = \"follows-per-day\"\nalgorithm = \"sliding_window_counter\"\nlimit = 400\nwindow = \"1d\"\n";
    assert!(matches!(
        gateway.fleet.publish(limit).await,
        Err(PublishError::Invalid(_))
    ));
    let stored = server
        .cli(&["EXISTS", "tollgate:fleet:{chirp}"])
        .expect("EXISTS");
    assert_eq!(stored.trim(), "0", "nothing was written");

    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("rules.toml");
    std::fs::write(&path, reads(1)).expect("write");
    let layer = RateLimitLayer::new(MemoryStore::new());
    let watcher = RuleWatcher::start(&path, Extractors::new(), &layer).expect("a valid file");
    for short in [&b""[..], b"0123456789"] {
        let refused = PublishedRules::builder("chirp")
            .signing_key(short)
            .follow(&connection, watcher.overlay())
            .await;
        assert!(
            matches!(refused, Err(PublishedRulesError::WeakKey(_))),
            "{short:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_announcement_whose_read_fails_is_retried_soon_not_at_the_next_poll() {
    let server = RedisServer::start().expect("start redis-server");
    server
        .cli(&[
            "ACL", "SETUSER", "follower", "on", ">pw", "+@all", "~*", "&*",
        ])
        .expect("ACL");
    let publisher = Setup::new(standalone(&server).await, "retry").start().await;
    let follower_url = format!("redis://follower:pw@127.0.0.1:{}/", server.port());
    let follower = Setup {
        connection: RedisConnection::connect(&follower_url)
            .await
            .expect("a valid address"),
        prefix: "retry",
        name: "chirp",
        poll_every: Duration::from_secs(3_600),
        key: None,
        max_bytes: 256 * 1024,
    }
    .start()
    .await;
    wait_for(&follower, "subscribed", |status| status.subscribed).await;
    // The follower's reads fail for a moment (a stand-in for a timeout or a failover).
    server
        .cli(&["ACL", "SETUSER", "follower", "-eval"])
        .expect("ACL");
    let version = publisher.fleet.publish(&reads(3)).await.expect("published");
    wait_for(&follower, "failed its read", |status| {
        status.last_redis_error.is_some()
    })
    .await;
    server
        .cli(&["ACL", "SETUSER", "follower", "+eval"])
        .expect("ACL");
    // The poll is an hour away: only the retry can bring the change.
    wait_for(&follower, "retried", |status| {
        status.version == Some(version)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_gateway_reports_the_fleets_top_refused_callers() {
    use tollgate::core::FingerprintSecret;
    use tollgate::published::top::FleetTopRefused;
    use tollgate::tower::key::PeerIp;
    use tollgate::tower::{KeyLogging, Rule};
    use tollgate::{Quota, RuleId};
    use tower::{Layer, ServiceExt};

    let server = RedisServer::start().expect("start redis-server");
    let connection = standalone(&server).await;
    let secret = FingerprintSecret::from_bytes(&[7; 32]).expect("a secret");
    let layer = || {
        RateLimitLayer::new(MemoryStore::new())
            .rule(
                Rule::new(
                    "per-ip",
                    Quota::fixed_window(1, Duration::from_secs(3_600)).expect("valid"),
                    PeerIp::new(),
                )
                .expect("id"),
            )
            .key_logging(KeyLogging::HashedWith(secret))
            .track_top_refused(10)
    };
    let refuse = |layer: &RateLimitLayer<MemoryStore>, times: usize| {
        let layer = layer.clone();
        async move {
            for _ in 0..times {
                let service = layer.layer(tower::service_fn(|_: axum::http::Request<()>| async {
                    Ok::<_, std::convert::Infallible>(axum::http::Response::new(()))
                }));
                let mut request = axum::http::Request::new(());
                request
                    .extensions_mut()
                    .insert(std::net::SocketAddr::from(([203, 0, 113, 7], 4000)));
                let _ = service.oneshot(request).await;
            }
        }
    };
    let (east, west) = (layer(), layer());
    refuse(&east, 6).await; // 1 allowed, 5 refused
    refuse(&west, 4).await; // 1 allowed, 3 refused
    // West publishes every 10 s, east every 100 ms: liveness is each report's own expiry, so the
    // slow gateway is still in the fast one's reports (west publishes once at start).
    let rule = RuleId::new("per-ip").expect("id");
    for (layer, refused) in [(&west, 3), (&east, 5)] {
        // Counted locally first (the counting thread gathers samples between batches).
        let counting = Instant::now();
        while layer
            .handle()
            .top_refused(&rule, 1)
            .expect("tracked")
            .refusals
            < refused
        {
            assert!(
                counting.elapsed() < Duration::from_secs(30),
                "never counted locally"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let west_top =
        FleetTopRefused::start(&connection, "chirp", "west", &west, Duration::from_secs(10))
            .expect("valid names");
    let east_top = FleetTopRefused::start(
        &connection,
        "chirp",
        "east",
        &east,
        Duration::from_millis(100),
    )
    .expect("valid names");
    let started = Instant::now();
    let callers = loop {
        let callers = east_top.report(&rule, 5).await.expect("redis answers");
        if callers
            .first()
            .is_some_and(|caller| caller.count == 8 && caller.error == 0)
        {
            break callers;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "never merged: {callers:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        callers.len(),
        1,
        "one caller, one fingerprint on both gateways: {callers:?}"
    );
    assert!(
        !callers[0].caller.contains("203.0.113"),
        "a fingerprint: {callers:?}"
    );
    drop(west_top);
}
