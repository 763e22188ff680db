//! The reqwest middleware keys cool-downs by the URL's own host, whatever its length (kept
//! from an adversarial review; feature `reqwest`).
#![cfg(feature = "reqwest")]

use std::time::Duration;

use tollgate_client::{CoolDowns, CoolingDown, RetryAfterMiddleware, RetryPolicy, WhenCooling};

/// A URL `http::Uri` cannot hold (longer than 64 KiB) keeps its own host and path.
#[tokio::test(start_paused = true)]
async fn a_url_http_uri_rejects_keeps_its_own_host() {
    let table = CoolDowns::new(16);
    table.hold_host("", tokio::time::Instant::now() + Duration::from_secs(30));
    let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(RetryAfterMiddleware::new(
            RetryPolicy::default()
                .cool_downs(table)
                .when_cooling(WhenCooling::FailFast),
        ))
        .build();
    let long = format!("http://127.0.0.1:9/search?q={}", "a".repeat(70_000));
    for url in [long.as_str()] {
        let parsed = reqwest::Url::parse(url).expect("valid in the test");
        let uri = parsed.as_str().parse::<http::Uri>();
        let result = client.get(url).send().await;
        let cooled = matches!(&result, Err(reqwest_middleware::Error::Middleware(e)) if e.downcast_ref::<CoolingDown>().is_some());
        assert!(
            !cooled,
            "{} (as http::Uri: parses: {})  held by the \"\" host's cool-down",
            &url[..40],
            uri.is_ok()
        );
    }
}
