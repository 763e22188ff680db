//! A hot partner key counted exactly, by leases and by local-then-sync, as a user runs it: G
//! gateways (1, 4 and 10), each a `FleetStore` over its own `RedisStore` connection to one
//! `redis-server` (started by the bench on a free loopback port, stopped at the end), each
//! ticking every 50 ms; T tasks per gateway (default 50) check the guide's `partner-api` key (a
//! token bucket of 200, refilled 200 a second) until the run ends (default 1.5 s), on a
//! multi-thread runtime, each check followed only by a yield, as a connection task reading its
//! next request. Per mode and G, next to the exact limiter flooded with the same checks at the
//! same instants (in memory):
//!
//! * **admitted / exact** and their difference, next to the mode's stated bound: leases admit
//!   at most what the exact limiter does and at least that less G·H + R·P (units held at the
//!   end, one period's refill); sync at most max(L / 10, G) more;
//! * **store calls**: scripts the server ran (`INFO commandstats`), per gateway per period
//!   (`top_up_every` = 100 ms for leases, `every` = 200 ms for sync), and per check.
//!
//! Run: `cargo bench -p tollgate-redis --bench fleet_modes -- [--seconds S] [--tasks T]`.
//! Without `--bench` (as `cargo test --all-targets` runs it) it makes a smoke run of 0.3 s with
//! 2 tasks on one gateway.

#![allow(clippy::print_stdout, reason = "a bench binary prints its table")]

mod common;
#[path = "../tests/common/fleet_flood.rs"]
mod fleet_flood;

use std::time::Duration;

use tollgate_core::{Counting, LeaseSettings, Quota, Rate, SyncSettings};

use crate::common::Options;

fn quota() -> Quota {
    Quota::token_bucket(200, Rate::per_second(200)).expect("a valid quota")
}

fn lease() -> LeaseSettings {
    LeaseSettings::new()
        .max_units(20)
        .top_up_every(Duration::from_millis(100))
        .lifetime(Duration::from_secs(1))
}

fn main() {
    let options =
        Options::from_env().or_smoke(&["--seconds", "0.3", "--tasks", "2", "--gateways", "1"]);
    let seconds: f64 = options.get("seconds", 1.5);
    let tasks: usize = options.get("tasks", 50);
    let only: usize = options.get("gateways", 0);
    let run = Duration::from_secs_f64(seconds);
    let sync = SyncSettings::new();
    let held = lease().held_at_most();
    println!(
        "{:<6} {:>3} {:>9} {:>9} {:>8} {:>7} {:>7} {:>10} {:>16} {:>10}",
        "mode",
        "G",
        "checks",
        "admitted",
        "exact",
        "diff",
        "bound",
        "calls",
        "calls/G/period",
        "calls/check"
    );
    for gateways in [1usize, 4, 10]
        .into_iter()
        .filter(|g| only == 0 || *g == only)
    {
        let g = gateways as u64;
        for (name, counting, period, bound) in [
            ("exact", Counting::Exact, 0.1, "0".to_owned()),
            (
                "lease",
                Counting::Lease(lease()),
                lease().top_up_period().as_secs_f64(),
                format!("-{}", g * held + 20),
            ),
            (
                "sync",
                Counting::Sync(sync),
                sync.interval().as_secs_f64(),
                format!("+{}", (quota().limit() / 10).max(g)),
            ),
        ] {
            let outcome = fleet_flood::run(gateways, tasks, quota(), counting, run);
            assert!(
                outcome.admitted > 0,
                "{name}: the flood got something through"
            );
            let periods = outcome.seconds / period;
            println!(
                "{:<6} {:>3} {:>9} {:>9} {:>8} {:>+7} {:>7} {:>10} {:>16.2} {:>10.4}",
                name,
                gateways,
                outcome.checks,
                outcome.admitted,
                outcome.exact,
                outcome.admitted as i64 - outcome.exact as i64,
                bound,
                outcome.calls,
                outcome.calls as f64 / (g as f64 * periods),
                outcome.calls as f64 / outcome.checks.max(1) as f64,
            );
        }
    }
    println!(
        "\n{tasks} tasks a gateway, {seconds} s a run; token bucket of 200, 200/s; lease: 20 units, \
         top-up every 100 ms, lifetime 1 s (H = {held}); sync: every 200 ms, default M."
    );
}
