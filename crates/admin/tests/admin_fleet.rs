//! Two gateways on one real redis-server: a change made through one gateway's admin API
//! reaches the other through the fleet document, and either answers the fleet's top refused
//! callers.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Gateway, ONCALL, RULES};
use reqwest::Method;
use serde_json::json;
use tollgate_admin::{Admin, AdminToken};
use tollgate_config::{Extractors, RuleWatcher};
use tollgate_core::FingerprintSecret;
use tollgate_published::PublishedRules;
use tollgate_published::top::FleetTopRefused;
use tollgate_redis::{RedisConnection, RedisStore};
use tollgate_redis_harness::RedisServer;
use tollgate_tower::{KeyLogging, RateLimitLayer};

/// One gateway of the fleet: its URL and what must live as long as it serves.
struct FleetGateway {
    url: String,
    client: reqwest::Client,
    _keep: (RuleWatcher, tempfile::TempDir),
}

impl FleetGateway {
    async fn start(connection: &RedisConnection, name: &str) -> FleetGateway {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("rules.toml");
        std::fs::write(&path, RULES).expect("rules");
        let store = RedisStore::builder()
            .prefix("admin-fleet")
            .build(connection.clone())
            .expect("store");
        // One fingerprint secret for the fleet, so a caller has one name on every gateway.
        let secret = FingerprintSecret::from_bytes(b"the fleet's fingerprint secret, 32+ bytes")
            .expect("secret");
        let layer = RateLimitLayer::new(store)
            .key_logging(KeyLogging::HashedWith(secret))
            .track_top_refused(100);
        let watcher = RuleWatcher::start(&path, Extractors::new(), &layer).expect("rules load");
        let fleet = PublishedRules::builder("chirp")
            .poll_every(Duration::from_secs(3_600))
            .follow(connection, watcher.overlay())
            .await
            .expect("follow");
        let top = FleetTopRefused::start(
            connection,
            "chirp",
            name,
            &layer,
            Duration::from_millis(100),
        )
        .expect("top");
        let admin = Admin::new(&layer, AdminToken::new("on-call", ONCALL).expect("token"))
            .fleet(&watcher, Arc::new(fleet))
            .fleet_top_refused(Arc::new(top));
        FleetGateway {
            url: common::serve(layer, admin).await,
            client: reqwest::Client::new(),
            _keep: (watcher, dir),
        }
    }

    fn admin(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.client
            .request(method, format!("{}/admin{path}", self.url))
            .bearer_auth(ONCALL)
    }

    async fn hello(&self) -> u16 {
        self.client
            .get(format!("{}/hello", self.url))
            .send()
            .await
            .expect("hello")
            .status()
            .as_u16()
    }

    /// Asks `path` until `done` holds of the JSON answer, failing after a generous deadline.
    async fn until(
        &self,
        path: &str,
        what: &str,
        done: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let started = Instant::now();
        loop {
            let (_, body) = Gateway::json(self.admin(Method::GET, path)).await;
            if done(&body) {
                return body;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "never {what}: {body}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// A redis-server and two gateways, `east` and `west`, following one fleet document on it.
async fn two_gateways() -> (RedisServer, FleetGateway, FleetGateway) {
    let server = RedisServer::start().expect("start redis-server");
    let connection = RedisConnection::connect(&server.url())
        .await
        .expect("connect");
    let east = FleetGateway::start(&connection, "east").await;
    let west = FleetGateway::start(&connection, "west").await;
    (server, east, west)
}

#[tokio::test(flavor = "multi_thread")]
async fn two_gateways_see_each_others_changes_and_the_fleets_top_refused_callers() {
    let (_server, east, west) = two_gateways().await;

    // A change through east's API...
    let (status, body) = Gateway::json(
        east.admin(Method::PATCH, "/v1/rules/reads")
            .json(&json!({"limit": 1})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body["version"]
            .as_str()
            .expect("version")
            .parse::<u64>()
            .is_ok(),
        "a fleet version: {body}"
    );
    assert_eq!(body["rule"]["source"], "fleet");
    // ... is in force on west.
    west.until("/v1/rules/reads", "changed on west", |rule| {
        rule["quota"]
            .as_str()
            .is_some_and(|quota| quota.contains("limit = 1"))
            && rule["source"] == "fleet"
    })
    .await;
    let health = west
        .until("/v1/health", "healthy", |health| health["status"] == "ok")
        .await;
    assert_eq!(
        health["fleet"]["version"].to_string(),
        body["version"].as_str().expect("version")
    );

    // One caller refused on both gateways (the count is shared in Redis): 1 allowed, 5 refused.
    let statuses = [
        east.hello().await,
        east.hello().await,
        east.hello().await,
        west.hello().await,
        west.hello().await,
        west.hello().await,
    ];
    assert_eq!(statuses, [200, 429, 429, 429, 429, 429]);
    let stats = east
        .until(
            "/v1/rules/reads/stats",
            "merged the fleet's refusals",
            |stats| stats["top_refused"]["callers"][0]["count"] == 5,
        )
        .await;
    assert_eq!(stats["top_refused"]["scope"], "fleet");
    assert_eq!(
        stats["top_refused"]["callers"]
            .as_array()
            .expect("callers")
            .len(),
        1,
        "{stats}"
    );

    // Withdrawn through west: both are back on their files' rule.
    let (status, body) = Gateway::json(west.admin(Method::DELETE, "/v1/rules/reads/change")).await;
    assert_eq!(status, 200, "{body}");
    east.until("/v1/rules/reads", "withdrawn on east", |rule| {
        rule["source"] == "file"
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn changes_made_at_once_through_two_gateways_are_both_in_force() {
    let (_server, east, west) = two_gateways().await;
    let rule = |id: &str| {
        format!(
            "[[rule]]\nid = \"{id}\"\nmatch = {{ path = \"/{id}\" }}\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow = \"1m\"\nkey = \"peer_ip\"\n"
        )
    };
    for round in 0..5 {
        let (e, w) = (format!("e{round}"), format!("w{round}"));
        let (a, b) = tokio::join!(
            Gateway::json(
                east.admin(Method::PUT, &format!("/v1/rules/{e}"))
                    .body(rule(&e))
            ),
            Gateway::json(
                west.admin(Method::PUT, &format!("/v1/rules/{w}"))
                    .body(rule(&w))
            ),
        );
        assert_eq!((a.0, b.0), (200, 200), "{} {}", a.1, b.1);
        for gateway in [&east, &west] {
            gateway
                .until("/v1/rules", "both changes in force", |rules| {
                    let ids: Vec<&str> = rules["rules"]
                        .as_array()
                        .map(|rules| {
                            rules
                                .iter()
                                .filter_map(|rule| rule["id"].as_str())
                                .collect()
                        })
                        .unwrap_or_default();
                    ids.contains(&e.as_str()) && ids.contains(&w.as_str())
                })
                .await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_gateway_that_missed_an_announcement_still_changes_what_the_fleet_has() {
    let (server, east, west) = two_gateways().await;
    // West hears nothing for a while (its subscription is cut; its poll is an hour).
    server
        .cli(&["CLIENT", "KILL", "TYPE", "pubsub"])
        .expect("cut subscriptions");
    let rule = "[[rule]]\nid = \"x\"\nmatch = { path = \"/x\" }\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow = \"1m\"\nkey = \"peer_ip\"\n";
    let (status, body) = Gateway::json(east.admin(Method::PUT, "/v1/rules/x").body(rule)).await;
    assert_eq!(status, 200, "{body}");
    // West reads the fleet's document before deciding: the change it withdraws is there.
    let (status, body) = Gateway::json(west.admin(Method::DELETE, "/v1/rules/x/change")).await;
    assert_eq!(status, 200, "{body}");
    east.until("/v1/rules", "x withdrawn on east", |rules| {
        rules["rules"]
            .as_array()
            .is_some_and(|rules| rules.iter().all(|rule| rule["id"] != "x"))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn changes_go_on_after_the_document_is_lost_in_redis() {
    let server = RedisServer::start().expect("start redis-server");
    let connection = RedisConnection::connect(&server.url())
        .await
        .expect("connect");
    let east = FleetGateway::start(&connection, "east").await;
    let (status, body) = Gateway::json(
        east.admin(Method::PATCH, "/v1/rules/reads")
            .json(&json!({"limit": 1})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    // A flush, or a failover onto an empty replica.
    server
        .cli(&["DEL", "tollgate:fleet:{chirp}"])
        .expect("lose the document");
    let (status, body) = Gateway::json(
        east.admin(Method::PATCH, "/v1/rules/reads")
            .json(&json!({"limit": 2})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body["rule"]["quota"]
            .as_str()
            .expect("quota")
            .contains("limit = 2"),
        "{body}"
    );
    // Both changes' rules are in the document Redis holds again.
    let (status, body) = Gateway::json(east.admin(Method::DELETE, "/v1/rules/reads/change")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["rule"]["source"], "file");
}
