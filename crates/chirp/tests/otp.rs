//! Chirp's `/otp` over real HTTP, as `examples/rules/chirp.toml` and the handler document it:
//! a number's range and whoever asks are challenged past their limits (`403` and the challenge
//! body, no limit disclosed), the number itself is refused (`429`), a request naming no one is
//! challenged, a number that cannot be assigned is `422`, and the global cap counts only codes
//! sent and raises its alert on the admin API as it nears.

use chirp::Options;
use reqwest::{Client, RequestBuilder, Response};

fn in_memory(rules: Option<&std::path::Path>) -> Options {
    Options {
        port: 0,
        rules: rules.map_or_else(|| Options::default().rules, std::path::Path::to_path_buf),
        admin_token: Some(TOKEN.to_owned()),
        ..Options::default()
    }
}

const TOKEN: &str = "chirp-admin-token-0123456789";

/// A UK mobile number in range `range` (two digits: each its own range of 10,000).
fn uk(range: u32, line: u32) -> String {
    format!("+44 7400 {range:02}{line:04}")
}

/// A code for `phone` asked by the device `device` from `address` (behind the trusted
/// loopback proxy).
fn otp(client: &Client, base: &str, phone: &str, device: &str, address: &str) -> RequestBuilder {
    client
        .post(format!("{base}/otp"))
        .header("x-device-id", device)
        .header("x-forwarded-for", address)
        .json(&serde_json::json!({ "phone": phone }))
}

async fn assert_challenge(response: Response, what: &str) {
    assert_eq!(response.status(), 403, "{what}");
    assert_eq!(
        response.headers()["content-type"],
        "application/problem+json",
        "{what}"
    );
    for header in ["retry-after", "ratelimit", "ratelimit-policy"] {
        assert!(
            response.headers().get(header).is_none(),
            "{what}: {header} tells the fraudster where the limit is"
        );
    }
    let body: serde_json::Value = response.json().await.expect("json");
    assert_eq!(body["challenge"], "captcha", "{what}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_range_past_two_codes_an_hour_is_challenged_however_the_number_is_written() {
    let running = chirp::start(&in_memory(None)).await.expect("starts");
    let (client, base) = (Client::new(), format!("http://{}", running.address));
    let written = ["+44 7911 123456", "+44-7911-123-456", "+44 (0)7911 123456"];
    for (at, phone) in written.iter().take(2).enumerate() {
        let device = format!("phone-{at}");
        let sent = otp(&client, &base, phone, &device, "10.1.0.1").send().await;
        assert_eq!(sent.expect("otp").status(), 200, "{phone}");
    }
    // The same number written a third way, from a third device: the range's third code.
    let third = otp(&client, &base, written[2], "phone-2", "10.1.0.1")
        .send()
        .await;
    assert_challenge(third.expect("otp"), "the range's third code").await;
    // Another number in the same range is the same range; one in the next is not.
    let neighbour = otp(&client, &base, "+44 7911 129999", "phone-3", "10.1.0.1")
        .send()
        .await;
    assert_challenge(neighbour.expect("otp"), "a neighbour in the range").await;
    let next = otp(&client, &base, "+44 7911 130000", "phone-4", "10.1.0.1")
        .send()
        .await;
    assert_eq!(next.expect("otp").status(), 200, "the next range");
}

#[tokio::test(flavor = "multi_thread")]
async fn whoever_asks_is_challenged_past_three_codes_an_hour_and_naming_no_one_is_challenged_at_once()
 {
    let running = chirp::start(&in_memory(None)).await.expect("starts");
    let (client, base) = (Client::new(), format!("http://{}", running.address));
    for range in 20..23 {
        let sent = otp(&client, &base, &uk(range, 1), "device-a", "10.2.0.1")
            .send()
            .await;
        assert_eq!(sent.expect("otp").status(), 200);
    }
    let fourth = otp(&client, &base, &uk(23, 1), "device-a", "10.2.0.1")
        .send()
        .await;
    assert_challenge(fourth.expect("otp"), "a device's fourth code").await;
    // Signed in, the account asks: its own count, apart from any device's.
    let signed_in =
        |range: u32| otp(&client, &base, &uk(range, 1), "device-a", "10.2.0.1").bearer_auth("ada");
    for range in 24..27 {
        assert_eq!(signed_in(range).send().await.expect("otp").status(), 200);
    }
    assert_challenge(
        signed_in(27).send().await.expect("otp"),
        "an account's fourth",
    )
    .await;
    // Neither signed in nor naming a device: nobody to count, so a challenge.
    let anonymous = client
        .post(format!("{base}/otp"))
        .header("x-forwarded-for", "10.2.0.2")
        .json(&serde_json::json!({ "phone": uk(28, 1) }))
        .send()
        .await;
    assert_challenge(anonymous.expect("otp"), "a request naming no one").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn numbers_that_cannot_be_assigned_are_422_and_count_nothing() {
    let running = chirp::start(&in_memory(None)).await.expect("starts");
    let (client, base) = (Client::new(), format!("http://{}", running.address));
    for bad in [
        "",
        "07911 123456",
        "+44 7700 900123",
        "+1 CALL-NOW",
        "+44 7911 123456 ext. 2",
        &"9".repeat(4_000),
    ] {
        let answer = otp(&client, &base, bad, "device-b", "10.3.0.1")
            .send()
            .await;
        assert_eq!(answer.expect("otp").status(), 422, "{bad:?}");
    }
    let body = client
        .post(format!("{base}/otp"))
        .header("x-device-id", "device-b")
        .body("{not json")
        .header("content-type", "application/json")
        .send()
        .await
        .expect("otp");
    assert!(body.status().is_client_error());
    // None of them was counted against the device.
    for range in 30..33 {
        let sent = otp(&client, &base, &uk(range, 1), "device-b", "10.3.0.1")
            .send()
            .await;
        assert_eq!(sent.expect("otp").status(), 200);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn one_address_past_thirty_codes_an_hour_is_challenged() {
    let running = chirp::start(&in_memory(None)).await.expect("starts");
    let (client, base) = (Client::new(), format!("http://{}", running.address));
    for at in 0..30 {
        let device = format!("device-{at}");
        let sent = otp(&client, &base, &uk(40 + at, 1), &device, "10.4.0.1")
            .send()
            .await;
        assert_eq!(sent.expect("otp").status(), 200, "code {at}");
    }
    let more = otp(&client, &base, &uk(70, 1), "device-x", "10.4.0.1")
        .send()
        .await;
    assert_challenge(more.expect("otp"), "the address's 31st").await;
    // Another address of the same /24 is not that address.
    let beside = otp(&client, &base, &uk(71, 1), "device-y", "10.4.0.2")
        .send()
        .await;
    assert_eq!(beside.expect("otp").status(), 200);
}

/// Chirp's rule file with `sms-per-range` raised and `otp-global` lowered, so the per-number
/// limit and the global cap can be reached in a test.
fn loosened(directory: &std::path::Path) -> std::path::PathBuf {
    let text = std::fs::read_to_string(Options::default().rules).expect("chirp.toml");
    let range = "id = \"sms-per-range\"\nalgorithm = \"sliding_window_counter\"\nlimit = 2\n";
    let global = "key = \"global\"\ncount_only_when";
    assert!(
        text.contains(range) && text.contains(global),
        "chirp.toml as expected"
    );
    let text = text
        .replace(range, &range.replace("limit = 2", "limit = 100"))
        .replace("limit = 3000\n", "limit = 10\n");
    let path = directory.join("chirp.toml");
    std::fs::write(&path, text).expect("written");
    path
}

#[tokio::test(flavor = "multi_thread")]
async fn a_number_past_five_codes_a_day_is_refused_with_retry_after() {
    let directory = tempfile::tempdir().expect("a temporary directory");
    let rules = loosened(directory.path());
    let running = chirp::start(&in_memory(Some(&rules)))
        .await
        .expect("starts");
    let (client, base) = (Client::new(), format!("http://{}", running.address));
    for at in 0..5 {
        let device = format!("device-{at}");
        let sent = otp(&client, &base, "+44 7911 123456", &device, "10.5.0.1")
            .send()
            .await;
        assert_eq!(sent.expect("otp").status(), 200, "code {at}");
    }
    let sixth = otp(&client, &base, "+447911123456", "device-6", "10.5.0.1")
        .send()
        .await
        .expect("otp");
    assert_eq!(sixth.status(), 429);
    assert!(sixth.headers().get("retry-after").is_some());
    let body: serde_json::Value = sixth.json().await.expect("json");
    assert_eq!(body["policy"], "sms-per-phone", "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_global_cap_counts_only_codes_sent_and_its_alert_shows_on_the_admin_api() {
    let directory = tempfile::tempdir().expect("a temporary directory");
    let rules = loosened(directory.path());
    let running = chirp::start(&in_memory(Some(&rules)))
        .await
        .expect("starts");
    let (client, base) = (Client::new(), format!("http://{}", running.address));
    let health = || async {
        let health: serde_json::Value = client
            .get(format!("{base}/admin/v1/health"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .expect("health")
            .json()
            .await
            .expect("json");
        health["alerting"].clone()
    };
    assert_eq!(
        health().await,
        serde_json::json!([]),
        "nothing near a limit yet"
    );
    // Codes that are not sent (a number that cannot be assigned, a request naming no one) do
    // not count against the cap.
    for _ in 0..20 {
        let refused = client
            .post(format!("{base}/otp"))
            .json(&serde_json::json!({ "phone": uk(50, 1) }))
            .send()
            .await
            .expect("otp");
        assert_eq!(refused.status(), 403);
    }
    for at in 0..10 {
        let device = format!("device-{at}");
        let sent = otp(&client, &base, &uk(at, 1), &device, "10.6.0.1")
            .send()
            .await;
        assert_eq!(sent.expect("otp").status(), 200, "code {at}");
        if at == 7 {
            let alerting = health().await;
            assert_eq!(alerting[0]["rule"], "otp-global", "{alerting}");
        }
    }
    let capped = otp(&client, &base, &uk(11, 1), "device-11", "10.6.0.1")
        .send()
        .await;
    assert_challenge(capped.expect("otp"), "past the global cap").await;
}
