//! The scripted session `--demo` runs: each limit of the table pushed past its edge over real
//! HTTP, and what each caller was told.

use reqwest::{Client, RequestBuilder, StatusCode};

/// One limit's outcome.
#[derive(Debug, Clone)]
pub struct Check {
    /// The row of the table.
    pub limit: &'static str,
    /// What the caller was told, in a few words.
    pub told: String,
    /// Whether that is what the table says.
    pub as_the_table_says: bool,
}

/// Statuses of `n` requests made by `make`.
async fn statuses(n: usize, mut make: impl FnMut(usize) -> RequestBuilder) -> Vec<StatusCode> {
    let mut seen = Vec::with_capacity(n);
    for at in 0..n {
        seen.push(
            make(at)
                .send()
                .await
                .map_or(StatusCode::BAD_GATEWAY, |response| response.status()),
        );
    }
    seen
}

/// What makes one run's callers its own: a number from the clock.
struct Run(u32);

impl Run {
    fn new() -> Run {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| {
                since.subsec_nanos() ^ u32::try_from(since.as_secs() % 1_000_000).unwrap_or(0)
            });
        Run(nanos)
    }

    /// `name`, for this run.
    fn name(&self, name: &str) -> String {
        format!("{name}-{:08x}", self.0)
    }

    /// An address in `10.<block>.<this run's byte>.<host>`: one /24 per block and run.
    fn address(&self, block: u8, host: usize) -> String {
        format!("10.{block}.{}.{}", self.0 % 256, host % 256)
    }

    /// A phone number in a range of this run's own (New York, exchange 200 to 999).
    fn phone(&self) -> String {
        format!("+1212{}0123", 200 + self.0 % 800)
    }
}

/// Statuses of requests made by `make` up to the first refusal (at most `n`).
async fn until_refused(n: usize, mut make: impl FnMut(usize) -> RequestBuilder) -> Vec<StatusCode> {
    let mut seen = Vec::new();
    for at in 0..n {
        let status = make(at)
            .send()
            .await
            .map_or(StatusCode::BAD_GATEWAY, |response| response.status());
        seen.push(status);
        if !status.is_success() {
            break;
        }
    }
    seen
}

/// A bucket's burst: at least `burst` successes and at most `refilled` more, then a 429.
fn refill_edge(seen: &[StatusCode], burst: usize, refilled: usize) -> (bool, String) {
    let admitted = seen.iter().take_while(|status| status.is_success()).count();
    let refused = seen.get(admitted).copied();
    let ok = (burst..=burst + refilled).contains(&admitted)
        && refused == Some(StatusCode::TOO_MANY_REQUESTS);
    let told = match refused {
        Some(status) => {
            format!("{admitted} allowed ({refilled} refilled meanwhile at most), then {status}")
        }
        None => format!("all {admitted} allowed"),
    };
    (ok, told)
}

/// `allowed` successes, then a refusal with `refusal`.
fn edge(seen: &[StatusCode], allowed: usize, refusal: StatusCode) -> (bool, String) {
    let ok = seen.len() == allowed + 1
        && seen[..allowed].iter().all(StatusCode::is_success)
        && seen[allowed] == refusal;
    let first = seen.iter().position(|status| !status.is_success());
    let told = match first {
        Some(at) => format!("{at} allowed, then {}", seen[at]),
        None => format!("all {} allowed", seen.len()),
    };
    (ok, told)
}

/// Runs the session against the gateway at `base` (`http://127.0.0.1:PORT`).
pub async fn run(base: &str) -> Vec<Check> {
    let client = Client::new();
    // Callers of this run only: a second run against the same Redis meets fresh counts.
    let run = Run::new();
    let url = |path: &str| format!("{base}{path}");
    let mut checks = Vec::new();
    let mut check = |limit: &'static str, (ok, told): (bool, String)| {
        checks.push(Check {
            limit,
            told,
            as_the_table_says: ok,
        });
    };

    // The bucket refills (10 a second) while the burst is sent: it may admit that much more.
    let started = std::time::Instant::now();
    let reads = until_refused(1_000, |_| {
        client.get(url("/feed")).bearer_auth(run.name("ada"))
    })
    .await;
    let refilled = usize::try_from(started.elapsed().as_millis() / 100 + 1).unwrap_or(usize::MAX);
    check(
        "reading: bursts of 50 per account",
        refill_edge(&reads, 50, refilled),
    );

    let posts = statuses(6, |_| {
        client.post(url("/posts")).bearer_auth(run.name("ada"))
    })
    .await;
    check(
        "posting: bursts of 5 per account",
        edge(&posts, 5, StatusCode::TOO_MANY_REQUESTS),
    );

    let follows = statuses(401, |at| {
        client
            .post(url(&format!("/users/u{at}/follow")))
            .bearer_auth(run.name("bob"))
    })
    .await;
    check(
        "following: 400 a day per account (in the handler)",
        edge(&follows, 400, StatusCode::TOO_MANY_REQUESTS),
    );

    let device = statuses(4, |_| {
        client
            .post(url("/signup"))
            .header("x-device-id", run.name("phone-1"))
            .header("x-forwarded-for", run.address(200, 7))
    })
    .await;
    check(
        "sign-ups: 3 a day per device, answered with a challenge",
        edge(&device, 3, StatusCode::FORBIDDEN),
    );

    let block = statuses(21, |at| {
        client
            .post(url("/signup"))
            .header("x-device-id", run.name(&format!("device-{at}")))
            .header("x-forwarded-for", run.address(201, at + 1))
    })
    .await;
    check(
        "sign-ups: 20 an hour per /24 block, answered with a challenge",
        edge(&block, 20, StatusCode::FORBIDDEN),
    );

    let login = |password: &'static str| {
        client.post(url("/login")).json(
            &serde_json::json!({"account": run.name("victim@example.com"), "password": password}),
        )
    };
    let right = login("correct horse")
        .send()
        .await
        .map_or(StatusCode::BAD_GATEWAY, |response| response.status());
    let wrong = statuses(11, |_| login("guess")).await;
    let failures = wrong
        .iter()
        .take_while(|status| **status == StatusCode::UNAUTHORIZED)
        .count();
    check(
        "login: 10 failed attempts per target account per 15 minutes",
        (
            right.is_success()
                && failures == 10
                && wrong.get(10) == Some(&StatusCode::TOO_MANY_REQUESTS),
            format!(
                "a right password {right}; {failures} wrong ones 401, then {}",
                wrong.get(10).copied().unwrap_or_default()
            ),
        ),
    );

    let codes = statuses(3, |_| {
        client
            .post(url("/otp"))
            .header("x-device-id", run.name("phone"))
            .json(&serde_json::json!({"phone": run.phone()}))
    })
    .await;
    check(
        "SMS codes: 2 an hour per number range, then a challenge",
        edge(&codes, 2, StatusCode::FORBIDDEN),
    );

    // 200 at once, and 200 more each second the burst takes.
    let started = std::time::Instant::now();
    let partner = until_refused(5_000, |_| {
        client
            .get(url("/partner/v1/feed"))
            .header("x-api-key", run.name("partner-small"))
    })
    .await;
    let refilled = usize::try_from(started.elapsed().as_millis() / 5 + 1).unwrap_or(usize::MAX);
    check(
        "partners: 200 a second per API key",
        refill_edge(&partner, 200, refilled),
    );
    checks
}

/// Prints `checks` as a table; whether all are as the table says.
#[allow(clippy::print_stdout)] // The demo's output is for its reader.
pub fn print(checks: &[Check]) -> bool {
    for check in checks {
        let mark = if check.as_the_table_says {
            "ok "
        } else {
            "BAD"
        };
        println!("{mark} {:<62} {}", check.limit, check.told);
    }
    checks.iter().all(|check| check.as_the_table_says)
}
