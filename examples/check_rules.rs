//! Checks a rule file without running anything: prints every mistake at its line and column
//! (exit 1), or the rules it would enforce (exit 0). For CI, before a rule change ships.
//!
//! `cargo run --features config --example check_rules -- examples/rules/chirp.toml`
//!
//! The service's named extractors must be registered here as in the service itself: this one
//! knows Chirp's `account`.

use std::io::Write;
use std::process::ExitCode;

use tollgate::tower::config::{Extractors, RuleFile};
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
    let extractors = Extractors::new().with(
        "account",
        ExtensionKey::new(|account: &AccountId| account.0.clone()),
    );
    match RuleFile::parse(&path, &text, &extractors) {
        Ok(file) => {
            // Written, not printed: a closed pipe (`| head`) ends the listing quietly.
            let mut out = std::io::stdout().lock();
            let header = ("rule", "algorithm", "limit", "full again after");
            let _ = writeln!(
                out,
                "{:<24} {:<24} {:>8}  {}",
                header.0, header.1, header.2, header.3
            );
            for rule in file.rules().rules() {
                let quota = rule.quota();
                let _ = writeln!(
                    out,
                    "{:<24} {:<24} {:>8}  {:?}",
                    rule.id().as_str(),
                    quota.algorithm().name(),
                    quota.limit(),
                    quota.replenish_time()
                );
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
