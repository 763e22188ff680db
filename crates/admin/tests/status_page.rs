//! The status page in a real headless browser: Debian's `chromium`, driven through
//! `chromedriver` (both installed by `scripts/test`). Logs in with a token, reads the rendered
//! page, saves a screenshot, logs out, and opens the page again with HTTP Basic.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{DEPLOY, Gateway, ONCALL, RULES, gateway_with};
use fantoccini::{Client, ClientBuilder, Locator};
use reqwest::Method;
use tollgate_admin::{Admin, AdminToken};

const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const CHROMIUM: &str = "/usr/bin/chromium";

/// A chromedriver of this test's own, stopped (with its browsers) when dropped, panics too.
struct Driver {
    child: Child,
    port: u16,
}

impl Driver {
    async fn start() -> Driver {
        for (binary, package) in [(CHROMEDRIVER, "chromium-driver"), (CHROMIUM, "chromium")] {
            assert!(
                std::path::Path::new(binary).exists(),
                "{binary} is missing: run scripts/test, or `apt-get install -y chromium chromium-driver` ({package})"
            );
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let mut driver = Driver { child, port };
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

async fn browser(driver: &Driver, profile: &std::path::Path) -> Client {
    let mut capabilities = serde_json::Map::new();
    capabilities.insert(
        "goog:chromeOptions".to_owned(),
        serde_json::json!({
            "binary": CHROMIUM,
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

    // Traffic: three allowed, two refused; wait until the refusals are counted.
    for _ in 0..5 {
        gateway.hello().await;
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
    let problem = client
        .wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css(".problem"))
        .await
        .expect("refused");
    assert!(problem.text().await.expect("text").contains("not accepted"));

    let form = client
        .form(Locator::Css("form[action='/admin/login']"))
        .await
        .expect("the login form");
    form.set_by_name("token", ONCALL).await.expect("type");
    form.submit().await.expect("submit");
    let rules = client
        .wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Id("rules"))
        .await
        .expect("the page");
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
        "file",
        "limit = 3",
        "enforce",
        "open",
        "3 allowed",
        "2 refused",
    ] {
        assert!(reads.contains(words), "{words:?} not in {reads:?}");
    }
    let callers = client
        .find_all(Locator::Css("#rule-reads ol.top li"))
        .await
        .expect("callers");
    assert_eq!(callers.len(), 1);
    assert!(callers[0].text().await.expect("text").ends_with(" 2"));
    let bars = client
        .find_all(Locator::Css("#rule-reads svg.sparkline rect"))
        .await
        .expect("bars");
    assert_eq!(bars.len(), 120, "sixty minutes, two bars each");
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
    client
        .wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css("form[action='/admin/login']"))
        .await
        .expect("the login form again");

    // HTTP Basic, the token as password (the browser answers the page's Basic challenge).
    let address = url.trim_start_matches("http://");
    client
        .goto(&format!(
            "http://anyone:{ONCALL}@{address}/admin?auth=basic"
        ))
        .await
        .expect("open with Basic");
    client
        .wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Id("rules"))
        .await
        .expect("the page over Basic");

    client.close().await.expect("close the browser");
    drop(driver);
}
