//! Hot reload of a real rule file: edits and atomic renames are picked up, a bad file is refused
//! with its mistakes while the rules in force stay, and requests see one rule set or the other.

#[path = "../../tower-layer/tests/common/mod.rs"]
mod common;

use std::convert::Infallible;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Empty;
use tollgate_config::{Extractors, RuleWatcher, WatchError, WatchStatus};
use tollgate_core::MemoryStore;
use tollgate_tower::RateLimitLayer;
use tower::{Layer, Service, ServiceExt, service_fn};

/// A file of one global rule `id` allowing `limit` a day.
fn rules(id: &str, limit: u64) -> String {
    format!(
        "[[rule]]\nid = \"{id}\"\nalgorithm = \"fixed_window\"\nlimit = {limit}\nwindow = \"1d\"\nkey = \"global\"\n"
    )
}

/// Waits until the watcher's status satisfies `done`, failing after a generous deadline.
async fn wait_for(
    watcher: &RuleWatcher,
    what: &str,
    done: impl Fn(&WatchStatus) -> bool,
) -> WatchStatus {
    let started = Instant::now();
    loop {
        let status = watcher.status();
        if done(&status) {
            return status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "never {what}: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A service's response to a plain request: its status and its `RateLimit-Policy` field.
async fn answer<S>(service: &mut S) -> (StatusCode, String)
where
    S: Service<
            Request<()>,
            Response = Response<tollgate_tower::ResponseBody<Empty<Bytes>>>,
            Error = Infallible,
        >,
{
    let response = service
        .ready()
        .await
        .expect("ready")
        .call(Request::new(()))
        .await
        .expect("infallible");
    let field = response
        .headers()
        .get("ratelimit-policy")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    (response.status(), field)
}

/// The first policy named in a response's `RateLimit-Policy`, and its status.
async fn policy<S>(service: &mut S) -> (StatusCode, String)
where
    S: Service<
            Request<()>,
            Response = Response<tollgate_tower::ResponseBody<Empty<Bytes>>>,
            Error = Infallible,
        >,
{
    let (status, field) = answer(service).await;
    let first = field.split(';').next().unwrap_or_default();
    (status, first.trim_matches('"').to_owned())
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write the rule file");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edits_and_renames_are_applied_and_a_bad_file_keeps_the_rules_in_force() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("rules.toml");
    write(&path, &rules("first", 100));
    let layer = RateLimitLayer::new(MemoryStore::new());
    let watcher = RuleWatcher::start(&path, Extractors::new(), &layer).expect("a valid file");
    let mut service = layer.layer(service_fn(|_: Request<()>| async {
        Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
    }));
    assert_eq!(
        policy(&mut service).await,
        (StatusCode::OK, "first".to_owned())
    );
    let first = watcher.status();
    assert_eq!(first.loads, 1);

    // Edited in place.
    write(&path, &rules("second", 100));
    let second = wait_for(&watcher, "loaded the edit", |status| status.loads == 2).await;
    assert_ne!(second.version, first.version);
    assert_eq!(policy(&mut service).await.1, "second");

    // A bad file: refused, its mistake located, the second rules still enforced.
    write(
        &path,
        "[[rule]]\nid = \"third\"\nalgorithm = \"fixed_window\"\nlimit = 0\nwindow = \"1d\"\nkey = \"global\"\n",
    );
    let refused = wait_for(&watcher, "refused the bad file", |status| {
        status.last_error.is_some()
    })
    .await;
    let mistakes = refused.last_error.expect("the mistakes");
    let mistake = mistakes.iter().next().expect("one mistake");
    assert_eq!((mistake.line, mistake.column), (4, 9), "{mistakes}");
    assert_eq!(
        refused.version, second.version,
        "the second rules stay in force"
    );
    assert_eq!(policy(&mut service).await.1, "second");
    assert!(
        watcher.reload().is_err(),
        "reloading by hand reports the same mistakes"
    );

    // Replaced by an atomic rename, as deploy tools and ConfigMaps do.
    let staged = dir.path().join(".rules.toml.new");
    write(&staged, &rules("third", 1));
    std::fs::rename(&staged, &path).expect("rename over the file");
    wait_for(&watcher, "loaded the renamed file", |status| {
        status.loads == 3 && status.last_error.is_none()
    })
    .await;
    assert_eq!(
        policy(&mut service).await,
        (StatusCode::OK, "third".to_owned())
    );
    assert_eq!(
        policy(&mut service).await,
        (StatusCode::TOO_MANY_REQUESTS, "third".to_owned())
    );
}

#[tokio::test]
async fn a_gateway_does_not_start_on_a_bad_or_missing_rule_file() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("rules.toml");
    let layer = RateLimitLayer::new(MemoryStore::new());
    let missing = RuleWatcher::start(&path, Extractors::new(), &layer).expect_err("no file");
    assert!(matches!(missing, WatchError::Read { .. }), "{missing}");
    write(&path, "[[rule]]\nid = 1\n");
    let invalid = RuleWatcher::start(&path, Extractors::new(), &layer).expect_err("a bad file");
    assert!(matches!(invalid, WatchError::Invalid(_)), "{invalid}");
    assert!(invalid.to_string().contains("rules.toml:2:6"), "{invalid}");
}

/// 8 clients over real HTTP while the file is rewritten 100 times — two valid rule sets and a
/// bad file in turn: no transport error and no 5xx, every response names exactly one of the two
/// policies, and after each bad file the rules in force are the previous ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reloads_under_load_never_mix_rule_sets_or_fail_a_request() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("rules.toml");
    let valid = [rules("set-a", 1_000_000), rules("set-b", 1_000_000)];
    let bad = "[[rule]]\nid = \"set-c\"\nalgorithm = \"fixed_window\"\nlimit = 0\nwindow = \"1d\"\nkey = \"global\"\n";
    write(&path, &valid[0]);
    let layer = RateLimitLayer::new(MemoryStore::new());
    let watcher = RuleWatcher::start(&path, Extractors::new(), &layer).expect("a valid file");
    let app = axum::Router::new()
        .route("/", axum::routing::get(|| async { "ok" }))
        .layer(layer);
    let server = Arc::new(common::server::TestServer::start(app).await);

    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let (server, stop) = (Arc::clone(&server), Arc::clone(&stop));
            tokio::spawn(async move {
                let mut seen = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let reply =
                        common::server::Reply::send(server.client.get(server.url("/"))).await;
                    let policy = reply
                        .headers
                        .get("ratelimit-policy")
                        .and_then(|value| value.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    seen.push((reply.status, policy));
                }
                seen
            })
        })
        .collect();

    let mut in_force = 0;
    for round in 0..100 {
        let loads = watcher.status().loads;
        if round % 3 == 2 {
            write(&path, bad);
            wait_for(&watcher, "refused the bad file", |status| {
                status.last_error.is_some()
            })
            .await;
            let reply = common::server::Reply::send(server.client.get(server.url("/"))).await;
            let shown = reply
                .headers
                .get("ratelimit-policy")
                .and_then(|value| value.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            let expected = if in_force == 0 {
                "\"set-a\""
            } else {
                "\"set-b\""
            };
            assert!(
                shown.starts_with(expected),
                "round {round}: {shown} after a bad file"
            );
        } else {
            in_force = 1 - in_force;
            write(&path, &valid[in_force]);
            wait_for(&watcher, "loaded the file", |status| {
                status.loads > loads && status.last_error.is_none()
            })
            .await;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut answers = 0;
    for client in clients {
        for (status, policy) in client.await.expect("no client panicked") {
            answers += 1;
            assert!(status.is_success(), "{status} during a reload");
            let names: Vec<&str> = ["\"set-a\"", "\"set-b\""]
                .into_iter()
                .filter(|name| policy.contains(name))
                .collect();
            assert_eq!(names.len(), 1, "one rule set per response: {policy:?}");
        }
    }
    assert!(
        answers > 100,
        "the clients made requests throughout ({answers})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_neighbour_does_not_hold_reloads_back_and_a_vanished_file_shows_in_the_status() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("rules.toml");
    write(&path, &rules("first", 100));
    let layer = RateLimitLayer::new(MemoryStore::new());
    let watcher = RuleWatcher::start(&path, Extractors::new(), &layer).expect("a valid file");
    let stop = Arc::new(AtomicBool::new(false));
    let neighbour = {
        let (log, stop) = (dir.path().join("access.log"), Arc::clone(&stop));
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::fs::write(&log, "GET /\n").expect("write the neighbour");
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    write(&path, &rules("second", 100));
    wait_for(&watcher, "loaded the edit beside a busy log", |status| {
        status.loads == 2
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    neighbour.join().expect("the neighbour stops");

    std::fs::remove_file(&path).expect("remove the rule file");
    let gone = wait_for(&watcher, "noticed the file is gone", |status| {
        status.last_error.is_some()
    })
    .await;
    let message = gone.last_error.expect("the error").to_string();
    assert!(message.contains("cannot read the file"), "{message}");
    assert_eq!(gone.loads, 2, "the rules in force stay");
}

/// The `q=` of every policy a response names, by id.
async fn limits<S>(service: &mut S) -> Vec<(String, u64)>
where
    S: Service<
            Request<()>,
            Response = Response<tollgate_tower::ResponseBody<Empty<Bytes>>>,
            Error = Infallible,
        >,
{
    let (_, field) = answer(service).await;
    let mut limits: Vec<(String, u64)> = field
        .split(',')
        .filter_map(|policy| {
            let mut parts = policy.trim().split(';');
            let id = parts.next()?.trim_matches('"').to_owned();
            let limit = parts
                .find_map(|part| part.strip_prefix("q="))?
                .parse()
                .ok()?;
            Some((id, limit))
        })
        .collect();
    limits.sort();
    limits
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_document_overrides_the_rules_it_names_and_file_edits_to_them_wait() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("rules.toml");
    write(
        &path,
        &format!("{}{}", rules("reads", 100), rules("posts", 10)),
    );
    let layer = RateLimitLayer::new(MemoryStore::new());
    let watcher = RuleWatcher::start(&path, Extractors::new(), &layer).expect("a valid file");
    let mut service = layer.layer(service_fn(|_: Request<()>| async {
        Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
    }));
    let overlay = watcher.overlay();

    overlay
        .apply("1", &format!("{}{}", rules("reads", 50), rules("extra", 7)))
        .expect("a valid document");
    assert_eq!(watcher.status().overridden, ["reads"]);
    assert_eq!(
        limits(&mut service).await,
        [
            ("extra".into(), 7),
            ("posts".into(), 10),
            ("reads".into(), 50)
        ]
    );

    // The file changes both rules: `posts` follows it, `reads` stays the fleet's.
    write(
        &path,
        &format!("{}{}", rules("reads", 5), rules("posts", 20)),
    );
    wait_for(&watcher, "loaded the edit", |status| status.loads == 3).await;
    assert_eq!(
        limits(&mut service).await,
        [
            ("extra".into(), 7),
            ("posts".into(), 20),
            ("reads".into(), 50)
        ]
    );

    // A document with mistakes is refused whole: nothing of it applies.
    let refused = overlay
        .apply("2", &format!("{}{}", rules("reads", 1), rules("extra", 0)))
        .expect_err("a zero limit");
    assert!(
        refused.to_string().starts_with("fleet document 2:"),
        "{refused}"
    );
    let status = watcher.status();
    assert_eq!(status.overlay_version.as_deref(), Some("1"));
    assert!(status.overlay_error.is_some());
    assert_eq!(
        limits(&mut service).await,
        [
            ("extra".into(), 7),
            ("posts".into(), 20),
            ("reads".into(), 50)
        ]
    );

    // Withdrawn: the file decides every rule again, including the edit that waited.
    overlay.clear();
    assert!(watcher.status().overridden.is_empty());
    assert_eq!(
        limits(&mut service).await,
        [("posts".into(), 20), ("reads".into(), 5)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merge_that_would_switch_a_rule_off_or_share_an_id_is_refused_whole() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("rules.toml");
    let limit = |id: &str, n: u64| {
        format!(
            "[[limit]]\nid = \"{id}\"\nalgorithm = \"fixed_window\"\nlimit = {n}\nwindow = \"1d\"\n"
        )
    };
    write(
        &path,
        &format!("{}{}", rules("reads", 100), limit("follows", 50)),
    );
    let layer =
        RateLimitLayer::new(MemoryStore::new()).registry(tollgate_tower::QuotaRegistry::new());
    let watcher = RuleWatcher::start(&path, Extractors::new(), &layer).expect("a valid file");
    let overlay = watcher.overlay();
    let admin = "[[rule]]\nid = \"admin\"\nmatch = { path = \"/admin\" }\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1d\"\nkey = \"global\"\n";

    // A document `[[limit]]` with the id of a file rule: refused, at the limit.
    let clash = overlay
        .apply("1", &limit("reads", 2))
        .expect_err("an id that is a rule here and a limit there");
    assert!(
        clash
            .to_string()
            .starts_with("fleet document 1:2:7: `[[limit]]` \"reads\" has the id of a `[[rule]]`"),
        "{clash}"
    );
    assert!(
        overlay.check(&limit("reads", 2)).is_err(),
        "check() says the same"
    );

    // A document replacing a file `[[limit]]` is listed as overriding it.
    overlay
        .apply("2", &format!("{admin}{}", limit("follows", 5)))
        .expect("a valid document");
    assert_eq!(watcher.status().overridden, ["follows"]);

    // A local edit exempting the fleet rule's path would switch it off: refused, the rules stay.
    write(
        &path,
        &format!(
            "{}{}[exempt]\npaths = [\"/admin\"]\n",
            rules("reads", 100),
            limit("follows", 50)
        ),
    );
    let refused = watcher
        .reload()
        .expect_err("the exemption covers the fleet's rule");
    assert!(
        refused
            .to_string()
            .contains("exempt path \"/admin\" covers every request rule \"admin\""),
        "{refused}"
    );
    assert!(watcher.status().last_error.is_some());

    // A local `[[limit]]` with the id of a fleet rule: refused too.
    write(
        &path,
        &format!(
            "{}{}{}",
            rules("reads", 100),
            limit("follows", 50),
            limit("admin", 1000)
        ),
    );
    assert!(watcher.reload().is_err());

    // A refused document's mistakes go when the document is withdrawn.
    assert!(overlay.apply("3", "[[rule]]\nid = \"x\"\n").is_err());
    assert!(watcher.status().overlay_error.is_some());
    overlay.clear();
    let status = watcher.status();
    assert!(
        status.overlay_error.is_none() && status.overridden.is_empty(),
        "{status:?}"
    );
}
