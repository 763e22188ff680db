//! The quick start: Chirp's limits, checked against the in-memory store.
//!
//! Run it with `cargo run --example quickstart`. It sends a burst of requests through two of
//! Chirp's rules (posting, and login attempts per target account, with a tighter login limit
//! tried in shadow mode; `examples/rules/chirp.toml` has them all) and prints what each caller
//! is told.

#![allow(clippy::print_stdout)] // An example talks to its reader.

use std::time::Duration;

use futures_executor::block_on;
use tollgate::{Item, Key, MemoryStore, Mode, Quota, Rate, RuleId, Store};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let store = MemoryStore::new();

    // Posting: 30 an hour per account, bursts of 5.
    let posting = RuleId::new("posting")?;
    let posting_quota = Quota::token_bucket(5, Rate::per_hour(30))?;
    // Login attempts: 10 per target account per 15 minutes, exact.
    let login = RuleId::new("login-per-account")?;
    let login_quota = Quota::sliding_window_log(10, Duration::from_secs(15 * 60))?;
    // A tighter login limit, tried in shadow mode before it is enforced.
    let login_trial = RuleId::new("login-per-account-trial")?;
    let trial_quota = Quota::sliding_window_log(5, Duration::from_secs(15 * 60))?;

    let account = Key::new("account-4821");
    println!("posting, 8 posts in a row from one account (token bucket, 5 then 30/h):");
    for attempt in 1..=8 {
        let answer = block_on(store.check(&[Item::new(&posting, posting_quota, &account)]))?;
        let decision = answer.items()[0].decision();
        if answer.is_allowed() {
            println!("  post {attempt}: allowed, {} left", decision.remaining());
        } else {
            println!(
                "  post {attempt}: 429, Retry-After: {}",
                decision.retry_after_secs()
            );
        }
    }

    let target = Key::new("victim@example.com");
    println!("login, 12 attempts on one target account (enforced 10/15min, shadow 5/15min):");
    for attempt in 1..=12 {
        let items = [
            Item::new(&login, login_quota, &target),
            Item::new(&login_trial, trial_quota, &target).with_mode(Mode::Shadow),
        ];
        let answer = block_on(store.check(&items))?;
        let shadow = if answer.items()[1].decision().is_allowed() {
            ""
        } else {
            " (shadow rule would refuse)"
        };
        match answer.refusing(&items) {
            None => println!("  attempt {attempt}: allowed{shadow}"),
            Some((item, refusal)) => println!(
                "  attempt {attempt}: 429 by {}, Retry-After: {}",
                item.rule(),
                refusal.decision().retry_after_secs()
            ),
        }
    }
    Ok(())
}
