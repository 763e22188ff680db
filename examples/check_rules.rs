//! Checks a rule file without running anything: prints every mistake at its line and column
//! (exit 1), or the rules it would enforce (exit 0). For CI, before a rule change ships.
//!
//! `cargo run --features config --example check_rules -- examples/rules/chirp.toml`
//!
//! The service's named extractors must be registered here as in the service itself: this one
//! knows Chirp's `account`.

use std::io::Write;
use std::process::ExitCode;

use tollgate::Quota;
use tollgate::config::{Extractors, RuleFile};
use tollgate::tower::key::ExtensionKey;

/// Chirp's signed-in user, as its authentication middleware inserts it.
#[derive(Clone)]
struct AccountId(String);

fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: check_rules <rules.toml>");
        return ExitCode::from(2);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) => {
            eprintln!("{path}: {error}");
            return ExitCode::from(2);
        }
    };
    match check(&path, &text) {
        Ok(listing) => {
            // Written, not printed: a closed pipe (`| head`) ends the listing quietly.
            let _ = std::io::stdout().lock().write_all(listing.as_bytes());
            ExitCode::SUCCESS
        }
        Err(mistakes) => {
            eprintln!("{mistakes}");
            ExitCode::from(1)
        }
    }
}

/// The rules `text` (the file at `path`) would enforce, a line each, or every mistake at its
/// line and column.
pub(crate) fn check(path: &str, text: &str) -> Result<String, String> {
    // What Chirp registers in code: its signed-in account, and the answer to a refused sign-up.
    let extractors = Extractors::new()
        .with(
            "account",
            ExtensionKey::new(|account: &AccountId| account.0.clone()),
        )
        .responder("challenge", |_refused| {
            let mut response =
                axum::http::Response::new(axum::body::Bytes::from_static(b"challenge"));
            *response.status_mut() = axum::http::StatusCode::FORBIDDEN;
            response
        });
    let file = RuleFile::parse(path, text, &extractors).map_err(|errors| {
        format!(
            "{errors}\n{} mistake(s); the file would not be loaded",
            errors.len()
        )
    })?;
    let header = ("rule", "algorithm", "limit", "full again after");
    let mut listing = format!(
        "{:<36} {:<24} {:>8}  {}\n",
        header.0, header.1, header.2, header.3
    );
    let mut listed: Vec<&str> = Vec::new();
    for rule in file.rules().rules() {
        // A rule on several methods is one rule with several route rows.
        if listed.contains(&rule.id().as_str()) {
            continue;
        }
        listed.push(rule.id().as_str());
        let mut line = row(rule.id().as_str(), rule.quota());
        if rule.settles() {
            line.push_str("; cost settled after the response");
        }
        if rule.is_per_message() {
            line.push_str("; per inbound gRPC message");
        }
        listing.push_str(&line);
        listing.push('\n');
    }
    for (id, quota) in file.limits() {
        listing.push_str(&row(&format!("{} (limit)", id.as_str()), quota));
        listing.push('\n');
    }
    Ok(listing)
}

/// One line of the table.
fn row(name: &str, quota: &Quota) -> String {
    let full_again = match quota.slot_ttl() {
        // A concurrency rule's slots come back as its requests end.
        Some(ttl) => format!("as requests end (a dead gateway's after {ttl:?})"),
        None => format!("{:?}", quota.replenish_time()),
    };
    format!(
        "{:<36} {:<24} {:>8}  {full_again}",
        name,
        quota.algorithm().name(),
        quota.limit(),
    )
}
