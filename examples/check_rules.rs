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
    match RuleFile::parse(&path, &text, &extractors) {
        Ok(file) => {
            // Written, not printed: a closed pipe (`| head`) ends the listing quietly.
            let mut out = std::io::stdout().lock();
            let header = ("rule", "algorithm", "limit", "full again after");
            let _ = writeln!(
                out,
                "{:<36} {:<24} {:>8}  {}",
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
                let _ = writeln!(out, "{line}");
            }
            for (id, quota) in file.limits() {
                let _ = writeln!(out, "{}", row(&format!("{} (limit)", id.as_str()), quota));
            }
            ExitCode::SUCCESS
        }
        Err(errors) => {
            eprintln!("{errors}");
            eprintln!("{} mistake(s); the file would not be loaded", errors.len());
            ExitCode::from(1)
        }
    }
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
