//! The status page in a real headless browser: `chromium`, driven through `chromedriver` —
//! those `scripts/test` found on `PATH` or installed (it passes them as `$CHROMIUM` and
//! `$CHROMEDRIVER`), else those on `PATH`. Logs in with a token, reads the rendered
//! page — every quota in words, each rule's chart with its axes and limit line, the rule
//! alerting near its limit — saves a screenshot, logs out, and opens the page again with HTTP
//! Basic.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{DEPLOY, Gateway, ONCALL, gateway_with};
use fantoccini::{Client, ClientBuilder, Locator};
use reqwest::Method;
use tollgate_admin::{Admin, AdminToken};
use tollgate_core::Key;

/// A rule of every algorithm, and one with a plan's and a partner's quotas: `reads` (GET),
/// which alerts at 60 % of its limit, and `posts` (POST) on `/hello`, where the test sends
/// traffic; the rest on paths never asked.
const RULES: &str = r#"
[[rule]]
id = "reads"
match = { method = "GET", path = "/hello" }
algorithm = "fixed_window"
limit = 3
window = "1h"
key = "peer_ip"
alert_at = "60%"

[[rule]]
id = "posts"
match = { method = "POST", path = "/hello" }
algorithm = "sliding_window_log"
limit = 2
window = "1m"
key = "peer_ip"

[[rule]]
id = "feed"
match = { method = "GET", path = "/feed" }
algorithm = "token_bucket"
capacity = 50
refill = { amount = 10, per = "1s" }
key = "peer_ip"

[[rule]]
id = "logins"
match = { method = "POST", path = "/login-attempts" }
algorithm = "sliding_window_log"
limit = 10
window = "15m"
key = "peer_ip"

[[rule]]
id = "follows"
match = { method = "POST", path = "/follows" }
algorithm = "sliding_window_counter"
limit = 400
window = "1d"
key = "peer_ip"

[[rule]]
id = "exports"
match = { method = "GET", path = "/exports" }
algorithm = "concurrency"
limit = 2
key = "peer_ip"

[[rule]]
id = "uploads"
match = { method = "POST", path = "/uploads" }
algorithm = "pacing"
rate = { amount = 10, per = "1s" }
max_delay = "2s"
key = "peer_ip"

[[rule]]
id = "partners"
match = { path = "/partner/{*rest}" }
algorithm = "token_bucket"
capacity = 200
refill = { amount = 200, per = "1s" }
key = { header = "x-api-key" }
overrides = { "partner-acme" = "500/s" }
plan = { header = "x-plan" }
plans = { pro = "1000/1s" }
"#;

/// What the page says of each rule's quota.
const WORDS: [(&str, &str); 8] = [
    ("reads", "3 an hour, fixed window"),
    ("posts", "2 in any minute, sliding window log"),
    ("feed", "bursts of 50, then 10 a second (token bucket)"),
    ("logins", "10 in any 15 minutes, sliding window log"),
    ("follows", "about 400 in any day, sliding window counter"),
    ("exports", "2 at once (concurrency)"),
    (
        "uploads",
        "10 a second, paced, waiting at most 2 s (leaky bucket)",
    ),
    (
        "partners",
        "bursts of 200, then 200 a second (token bucket)",
    ),
];

/// The program `$variable` names (set by `scripts/test` to what it found or installed), else
/// `name` on `PATH`. A missing one fails the test, saying how to install it: never a skip.
fn program(variable: &str, name: &str, package: &str) -> PathBuf {
    let install = format!(
        "run scripts/test (it installs it), or `apt-get install -y {package}`, or set ${variable} to its path"
    );
    if let Some(named) = std::env::var_os(variable).filter(|value| !value.is_empty()) {
        let path = PathBuf::from(named);
        assert!(
            path.is_file(),
            "${variable} is {}, which is not a file: {install}",
            path.display()
        );
        return path;
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|directory| directory.join(name))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| panic!("{name} is not on PATH and ${variable} is not set: {install}"))
}

/// A chromedriver of this test's own, stopped (with its browsers) when dropped, panics too.
struct Driver {
    child: Child,
    port: u16,
    /// The browser it drives.
    chromium: PathBuf,
}

impl Driver {
    async fn start() -> Driver {
        let chromedriver = program("CHROMEDRIVER", "chromedriver", "chromium-driver");
        let chromium = program("CHROMIUM", "chromium", "chromium");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new(&chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("start {}: {error}", chromedriver.display()));
        let mut driver = Driver {
            child,
            port,
            chromium,
        };
        let status = format!("http://127.0.0.1:{port}/status");
        let client = reqwest::Client::new();
        let started = Instant::now();
        loop {
            if let Ok(response) = client.get(&status).send().await
                && response
                    .text()
                    .await
                    .is_ok_and(|body| body.contains("\"ready\":true"))
            {
                return driver;
            }
            if let Ok(Some(exit)) = driver.child.try_wait() {
                panic!("chromedriver exited: {exit}");
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "chromedriver not ready within 30 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // `/shutdown` makes chromedriver close its browsers first; a bare kill can orphan them.
        if let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", self.port)) {
            use std::io::Write;
            let _ = write!(
                stream,
                "GET /shutdown HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n",
                self.port
            );
        }
        let asked = Instant::now();
        while asked.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The element `locator` finds once the page a submit, a click or a `goto` started has loaded,
/// waiting up to 10 s. A lookup that lands while the browser is still navigating is aborted
/// (WebDriver's "aborted by navigation", seen on a loaded machine) and asked again; any other
/// error fails the test, naming `what`.
async fn after_navigation(
    client: &Client,
    locator: Locator<'_>,
    what: &str,
) -> fantoccini::elements::Element {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let found = client
            .wait()
            .at_most(Duration::from_secs(10))
            .for_element(locator)
            .await;
        match found {
            Ok(element) => return element,
            Err(error) if error.to_string().contains("navigation") && Instant::now() < deadline => {
            }
            Err(error) => panic!("{what}: {error}"),
        }
    }
}

async fn browser(driver: &Driver, profile: &std::path::Path) -> Client {
    let mut capabilities = serde_json::Map::new();
    capabilities.insert(
        "goog:chromeOptions".to_owned(),
        serde_json::json!({
            "binary": driver.chromium,
            "args": [
                "--headless=new",
                "--no-sandbox",
                "--disable-dev-shm-usage",
                "--window-size=1400,900",
                format!("--user-data-dir={}", profile.display()),
            ],
        }),
    );
    ClientBuilder::rustls()
        .expect("rustls")
        .capabilities(capabilities)
        .connect(&format!("http://127.0.0.1:{}", driver.port))
        .await
        .expect("a webdriver session")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_status_page_in_headless_chromium() {
    // The default cookie: `Secure` (browsers keep it for http://127.0.0.1, a secure context).
    let gateway = gateway_with(RULES, |layer, watcher| {
        Admin::new(layer, AdminToken::new("on-call", ONCALL).expect("token"))
            .token(AdminToken::new("deploy", DEPLOY).expect("token"))
            .rule_file(watcher)
    })
    .await;
    let url = gateway.url.clone();

    // Traffic: three reads allowed, two refused; two posts allowed, one refused. Wait until
    // the refusals are counted.
    for _ in 0..5 {
        gateway.hello().await;
    }
    for expected in [200, 200, 429] {
        let posted = gateway
            .client
            .post(format!("{url}/hello"))
            .send()
            .await
            .expect("post");
        assert_eq!(posted.status(), expected);
    }
    for _ in 0..500 {
        let (_, stats) = Gateway::json(gateway.admin(Method::GET, "/v1/rules/reads/stats")).await;
        if stats["top_refused"]["callers"][0]["count"] == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let profile = tempfile::tempdir().expect("profile");
    let driver = Driver::start().await;
    let client = browser(&driver, profile.path()).await;

    // No credentials: the login form.
    client
        .goto(&format!("{url}/admin"))
        .await
        .expect("open the page");
    assert_eq!(
        client.current_url().await.expect("url").path(),
        "/admin/login"
    );
    let form = client
        .form(Locator::Css("form[action='/admin/login']"))
        .await
        .expect("the login form");
    form.set_by_name("token", "a-wrong-token-0123456789")
        .await
        .expect("type");
    form.submit().await.expect("submit");
    let problem = after_navigation(&client, Locator::Css(".problem"), "refused").await;
    assert!(problem.text().await.expect("text").contains("not accepted"));

    let form = client
        .form(Locator::Css("form[action='/admin/login']"))
        .await
        .expect("the login form");
    form.set_by_name("token", ONCALL).await.expect("type");
    form.submit().await.expect("submit");
    let rules = after_navigation(&client, Locator::Id("rules"), "the page").await;
    assert_eq!(client.current_url().await.expect("url").path(), "/admin");

    // The cookie: HttpOnly, SameSite=Strict, Secure.
    let cookies = client.get_all_cookies().await.expect("cookies");
    let session = cookies
        .iter()
        .find(|cookie| cookie.name() == "tollgate_admin")
        .expect("a session cookie");
    assert_eq!(session.http_only(), Some(true));
    assert_eq!(format!("{:?}", session.same_site()), "Some(Strict)");
    assert_eq!(session.secure(), Some(true));
    assert_ne!(
        session.value(),
        ONCALL,
        "the cookie is a session id, not the token"
    );

    // The rendered page.
    let reads = client
        .find(Locator::Id("rule-reads"))
        .await
        .expect("the reads row")
        .text()
        .await
        .expect("text");
    for words in [
        "reads",
        "alerting",
        "file",
        "enforce",
        "open",
        "3 allowed",
        "2 refused",
    ] {
        assert!(reads.contains(words), "{words:?} not in {reads:?}");
    }
    let posts = client
        .find(Locator::Id("rule-posts"))
        .await
        .expect("the posts row")
        .text()
        .await
        .expect("text");
    assert!(!posts.contains("alerting"), "{posts:?}");
    // The rules alerting near their limit, in the health panel: `reads`, refused.
    let alerting = client
        .find(Locator::Id("alerting"))
        .await
        .expect("the alerting rules")
        .text()
        .await
        .expect("text");
    assert!(
        alerting.starts_with("reads 100 % of its limit (alerts at 60 %), since ")
            && alerting.ends_with(" UTC"),
        "{alerting:?}"
    );
    assert!(
        !reads.contains("limit = 3"),
        "the rule file's text waits behind its disclosure: {reads:?}"
    );
    let callers = client
        .find_all(Locator::Css("#rule-reads ol.top li"))
        .await
        .expect("callers");
    assert_eq!(callers.len(), 1);
    assert!(callers[0].text().await.expect("text").ends_with(" 2"));
    quotas_in_words(&client, &gateway).await;
    charts(&client).await;
    assert_eq!(
        client
            .find(Locator::Id("status"))
            .await
            .expect("status")
            .text()
            .await
            .expect("text"),
        "ok"
    );
    assert!(
        client
            .find(Locator::Id("store"))
            .await
            .expect("store")
            .text()
            .await
            .expect("text")
            .starts_with("reachable")
    );
    let version = gateway.watcher.status().version.expect("version");
    assert!(
        client
            .find(Locator::Id("version"))
            .await
            .expect("version")
            .text()
            .await
            .expect("text")
            .contains(&version)
    );
    let refresh = client
        .find(Locator::Css("meta[http-equiv='refresh']"))
        .await
        .expect("refreshes itself");
    assert_eq!(
        refresh.attr("content").await.expect("content").as_deref(),
        Some("10")
    );
    assert!(rules.text().await.expect("text").contains("posts"));

    let screenshot = client.screenshot().await.expect("screenshot");
    assert!(screenshot.starts_with(b"\x89PNG\r\n\x1a\n"));
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("status-page.png");
    std::fs::write(&path, &screenshot).expect("save the screenshot");
    eprintln!("screenshot: {}", path.display());

    // The cookie opens the page, never the API.
    let cookie_only = gateway
        .client
        .get(format!("{url}/admin/v1/rules"))
        .header("cookie", format!("tollgate_admin={}", session.value()))
        .send()
        .await
        .expect("send");
    assert_eq!(cookie_only.status(), 401);

    // Logging out ends the session.
    client
        .find(Locator::Css("form[action='/admin/logout'] button"))
        .await
        .expect("log out")
        .click()
        .await
        .expect("click");
    after_navigation(
        &client,
        Locator::Css("form[action='/admin/login']"),
        "the login form again",
    )
    .await;

    // HTTP Basic, the token as password (the browser answers the page's Basic challenge).
    let address = url.trim_start_matches("http://");
    client
        .goto(&format!(
            "http://anyone:{ONCALL}@{address}/admin?auth=basic"
        ))
        .await
        .expect("open with Basic");
    after_navigation(&client, Locator::Id("rules"), "the page over Basic").await;

    client.close().await.expect("close the browser");
    drop(driver);
}

/// Every rule's quota in words, the overrides too; the rule file's text behind a disclosure.
async fn quotas_in_words(client: &Client, gateway: &Gateway) {
    for (rule, expected) in WORDS {
        let words = client
            .find(Locator::Css(&format!("#rule-{rule} td.quota .words")))
            .await
            .unwrap_or_else(|_| panic!("{rule}'s quota in words"))
            .text()
            .await
            .expect("text");
        assert_eq!(words, expected, "rule {rule}");
    }
    let mut overrides = Vec::new();
    for entry in client
        .find_all(Locator::Css("#rule-partners ul.overrides li"))
        .await
        .expect("the overrides")
    {
        overrides.push(entry.text().await.expect("text"));
    }
    // The partner's key as the page shows every caller: a fingerprint.
    let partner = gateway
        .layer
        .handle()
        .key_logging()
        .show(&Key::new("partner-acme"));
    assert_eq!(
        overrides,
        [
            "plan pro: bursts of 1,000, then 1,000 a second (token bucket)".to_owned(),
            format!("caller {partner}: bursts of 500, then 500 a second (token bucket)"),
        ]
    );
    assert!(!overrides[1].contains("partner-acme"));

    let toml = client
        .find(Locator::Css("#rule-reads details.toml pre"))
        .await
        .expect("the rule file's text");
    assert!(!toml.is_displayed().await.expect("displayed"), "closed");
    client
        .find(Locator::Css("#rule-reads details.toml summary"))
        .await
        .expect("the disclosure")
        .click()
        .await
        .expect("open it");
    assert!(toml.is_displayed().await.expect("displayed"), "open");
    let text = toml.text().await.expect("text");
    for field in [
        "id = \"reads\"",
        "algorithm = \"fixed_window\"",
        "limit = 3",
        "window = \"1h\"",
    ] {
        assert!(text.contains(field), "{field:?} not in {text:?}");
    }
}

/// Each rule's chart: labelled axes, a legend, the limit line where it bounds a minute (and
/// why not where it does not), a bar a minute.
async fn charts(client: &Client) {
    let figures = client
        .find_all(Locator::Css("#rules figure.chart svg"))
        .await
        .expect("charts");
    assert_eq!(figures.len(), WORDS.len(), "a chart for every rule");
    for (rule, _) in WORDS {
        let chart = format!("#rule-{rule} figure.chart svg");
        let mut titles = Vec::new();
        for title in client
            .find_all(Locator::Css(&format!("{chart} .axis-title")))
            .await
            .expect("axis titles")
        {
            titles.push(title.text().await.expect("text"));
        }
        assert_eq!(
            titles,
            ["minutes ago", "requests per minute"],
            "rule {rule}"
        );
        let minutes = client
            .find_all(Locator::Css(&format!("{chart} g.minute")))
            .await
            .expect("minutes");
        assert_eq!(minutes.len(), 60, "a bar a minute for the last hour");
        let legend = client
            .find(Locator::Css(&format!("{chart} g.legend")))
            .await
            .expect("a legend")
            .text()
            .await
            .expect("text");
        assert!(
            legend.contains("allowed") && legend.contains("refused"),
            "{legend:?}"
        );
    }

    // posts: 2 in any minute, a line at 2, over the two allowed and one refused.
    let posts = client
        .find(Locator::Css("#rule-posts figure.chart svg"))
        .await
        .expect("the posts chart");
    let summary = posts
        .attr("aria-label")
        .await
        .expect("label")
        .unwrap_or_default();
    assert!(
        summary.contains("2 allowed, 1 refused; limit 2 a minute per caller"),
        "{summary:?}"
    );
    let line = client
        .find(Locator::Css("#rule-posts figure.chart line.limit"))
        .await
        .expect("the limit line");
    // (WebDriver's "displayed" wants an area, which a horizontal line has not: its box is it.)
    let (_, line_y, line_width, _) = line.rectangle().await.expect("where");
    assert!(line_width > 300.0, "across the chart: {line_width}");
    let (_, chart_y, _, chart_height) = posts.rectangle().await.expect("where");
    assert!(
        chart_y < line_y && line_y < chart_y + chart_height,
        "the line {line_y} inside the chart {chart_y}+{chart_height}"
    );
    assert_eq!(
        client
            .find(Locator::Css("#rule-posts text.limit-label"))
            .await
            .expect("the line's label")
            .text()
            .await
            .expect("text"),
        "limit: 2 a minute per caller"
    );
    let feed = client
        .find(Locator::Css("#rule-feed text.limit-label"))
        .await
        .expect("the feed's line label")
        .text()
        .await
        .expect("text");
    assert_eq!(feed, "limit: 600 a minute per caller");

    let partners = client
        .find(Locator::Css("#rule-partners figcaption"))
        .await
        .expect("a note on the overrides")
        .text()
        .await
        .expect("text");
    assert!(partners.contains("the rule's own quota"), "{partners:?}");

    // No line where the limit bounds no minute, and the chart says why.
    for (rule, why) in [
        ("reads", "counts over an hour"),
        ("logins", "counts over 15 minutes"),
        ("exports", "in flight"),
    ] {
        assert!(
            client
                .find_all(Locator::Css(&format!("#rule-{rule} line.limit")))
                .await
                .expect("lines")
                .is_empty(),
            "no line for {rule}"
        );
        let caption = client
            .find(Locator::Css(&format!("#rule-{rule} figcaption")))
            .await
            .expect("why no line")
            .text()
            .await
            .expect("text");
        assert!(caption.contains(why), "{rule}: {caption:?}");
    }
}
