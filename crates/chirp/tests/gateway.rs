//! The Chirp gateway over real HTTP: every limit of the table at its edge (the `--demo`
//! session), the sign-up challenge, login failing closed while Redis is down, a bad rule file
//! refused with its line, and the admin API and metrics behind `ADMIN_TOKEN`.

use chirp::Options;
use tollgate_redis_harness::RedisServer;

fn in_memory() -> Options {
    Options {
        port: 0,
        ..Options::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_limit_behaves_as_the_table_says() {
    let running = chirp::start(&in_memory()).await.expect("starts");
    // Twice against one server: each run's callers are its own.
    for _ in 0..2 {
        let checks = chirp::demo::run(&format!("http://{}", running.address)).await;
        assert_eq!(checks.len(), 8);
        for check in &checks {
            assert!(check.as_the_table_says, "{}: {}", check.limit, check.told);
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_sign_up_gets_a_challenge_that_does_not_show_the_limit() {
    let running = chirp::start(&in_memory()).await.expect("starts");
    let client = reqwest::Client::new();
    let signup = || {
        client
            .post(format!("http://{}/signup", running.address))
            .header("x-device-id", "phone-9")
    };
    for _ in 0..3 {
        assert_eq!(signup().send().await.expect("signup").status(), 200);
    }
    let refused = signup().send().await.expect("signup");
    assert_eq!(refused.status(), 403);
    assert_eq!(
        refused.headers()["content-type"],
        "application/problem+json"
    );
    for header in [
        "retry-after",
        "ratelimit",
        "ratelimit-policy",
        "x-ratelimit-limit",
    ] {
        assert!(
            refused.headers().get(header).is_none(),
            "{header} tells the spammer where the limit is"
        );
    }
    let body: serde_json::Value = refused.json().await.expect("json");
    assert_eq!(body["challenge"], "captcha");

    // A script that leaves its device out does not skip the device limit: it is refused.
    let anonymous = client
        .post(format!("http://{}/signup", running.address))
        .send()
        .await
        .expect("signup");
    assert_eq!(anonymous.status(), 400);
}

#[tokio::test(flavor = "multi_thread")]
async fn with_redis_down_logins_fail_closed_and_reading_goes_on() {
    let server = RedisServer::start().expect("start redis-server");
    let options = Options {
        redis: Some(server.url()),
        ..in_memory()
    };
    let running = chirp::start(&options).await.expect("starts");
    let client = reqwest::Client::new();
    let base = format!("http://{}", running.address);
    let login = || {
        client
            .post(format!("{base}/login"))
            .json(&serde_json::json!({"account": "ada", "password": "guess"}))
    };
    // Counted in Redis (a first call on a loaded machine may miss the deadline: wait for one).
    let started = std::time::Instant::now();
    while login().send().await.expect("login").status() != 401 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "Redis never answered"
        );
    }
    server.kill().expect("stop redis-server");
    assert_eq!(
        login().send().await.expect("login").status(),
        503,
        "fails closed"
    );
    let feed = client
        .get(format!("{base}/feed"))
        .bearer_auth("ada")
        .send()
        .await
        .expect("feed");
    assert_eq!(feed.status(), 200, "reading fails open");
}

#[tokio::test]
async fn a_rule_file_with_a_mistake_is_refused_at_its_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("rules.toml");
    std::fs::write(&path, "[[rule]]\nid = \"reads\"\nalgoritm = \"gcra\"\n").expect("write");
    let options = Options {
        rules: path.clone(),
        ..in_memory()
    };
    let error = chirp::start(&options)
        .await
        .err()
        .expect("refused")
        .to_string();
    assert!(
        error.contains("rules.toml:3:1") && error.contains("algorithm"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_admin_token_mounts_the_admin_api_and_metrics() {
    let options = Options {
        admin_token: Some("chirp-admin-token-0123456789".to_owned()),
        ..in_memory()
    };
    let running = chirp::start(&options).await.expect("starts");
    let client = reqwest::Client::new();
    let base = format!("http://{}", running.address);
    client
        .get(format!("{base}/feed"))
        .bearer_auth("ada")
        .send()
        .await
        .expect("feed");
    let rules = client
        .get(format!("{base}/admin/v1/rules"))
        .bearer_auth("chirp-admin-token-0123456789")
        .send()
        .await
        .expect("rules");
    assert_eq!(rules.status(), 200);
    // The status page at the mount point, and at `/admin/`: the OpenAPI document's `/` there.
    for page in ["/admin", "/admin/"] {
        let page = client
            .get(format!("{base}{page}"))
            .bearer_auth("chirp-admin-token-0123456789")
            .send()
            .await
            .expect("page");
        assert_eq!(page.status(), 200, "{}", page.url());
    }
    let unauthorized = client
        .get(format!("{base}/admin/v1/rules"))
        .send()
        .await
        .expect("rules");
    assert_eq!(unauthorized.status(), 401);
    let metrics = client
        .get(format!("{base}/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains("tollgate_checks_total{rule=\"reads\",outcome=\"allowed\"} 1"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn partners_get_the_legacy_headers_too_and_a_contract_quota() {
    let running = chirp::start(&in_memory()).await.expect("starts");
    let client = reqwest::Client::new();
    let partner = |key: &str| {
        client
            .get(format!("http://{}/partner/v1/feed", running.address))
            .header("x-api-key", key.to_owned())
    };
    let small = partner("partner-small").send().await.expect("partner");
    assert_eq!(small.headers()["x-ratelimit-limit"], "200");
    assert!(small.headers().get("ratelimit-policy").is_some());
    let acme = partner("partner-acme").send().await.expect("partner");
    assert_eq!(acme.headers()["x-ratelimit-limit"], "500");
}

#[tokio::test(flavor = "multi_thread")]
async fn per_account_endpoints_need_an_account() {
    let running = chirp::start(&in_memory()).await.expect("starts");
    let client = reqwest::Client::new();
    for (method, path) in [
        ("GET", "/feed"),
        ("GET", "/profiles/ada"),
        ("POST", "/posts"),
        ("POST", "/users/bob/follow"),
    ] {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let anonymous = client
            .request(method, format!("http://{}{path}", running.address))
            .send()
            .await
            .expect("send");
        assert_eq!(anonymous.status(), 401, "{path} without an account");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn one_phone_or_account_however_it_is_written_and_no_partner_without_a_key() {
    let running = chirp::start(&in_memory()).await.expect("starts");
    let client = reqwest::Client::new();
    let base = format!("http://{}", running.address);
    let otp = |phone: &str| {
        client
            .post(format!("{base}/otp"))
            .header("x-device-id", format!("device-{phone}"))
            .json(&serde_json::json!({ "phone": phone }))
    };
    // One range however the number is written: its third code is challenged.
    for phone in ["+12125550123", "+1 212 555 0123"] {
        assert_eq!(otp(phone).send().await.expect("otp").status(), 200);
    }
    assert_eq!(
        otp("+1 (212) 555-0123").send().await.expect("otp").status(),
        403
    );
    assert_eq!(otp("").send().await.expect("otp").status(), 422);
    let login = |account: &str| {
        client
            .post(format!("{base}/login"))
            .json(&serde_json::json!({ "account": account, "password": "guess" }))
    };
    for _ in 0..10 {
        assert_eq!(
            login("victim@example.com")
                .send()
                .await
                .expect("login")
                .status(),
            401
        );
    }
    assert_eq!(
        login(" Victim@EXAMPLE.com")
            .send()
            .await
            .expect("login")
            .status(),
        429
    );
    let keyless = client
        .get(format!("{base}/partner/v1/feed"))
        .send()
        .await
        .expect("partner");
    assert_eq!(keyless.status(), 401);
}
