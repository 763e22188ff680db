//! The simulator's expectations on shortened scenarios: a per-IP limit lets the sign-up wave
//! through and blocks the crowd; Chirp's layered limits hold the wave to the bound their
//! device and block limits imply, hold the looping partner to its quota within a second, block
//! no one in the crowd, answer a store outage rule by rule as their failure policies say, and
//! keep the innocents' latency flat while one account's slow exports would fill the service.

use std::time::Duration;

use tollgate::OnStoreFailure;
use tollgate_simulator::{
    Crowd, Habits, OtpAttack, OutageAndFraud, Outcome, PartnerLoop, Policy, RealCodes, Scenario,
    SlowExports, Wave, simulate,
};

const SEED: u64 = 2026;

fn run(scenario: &Scenario, policy: &Policy) -> Outcome {
    simulate(scenario, policy, SEED, &mut |_| {}).expect("the simulation runs")
}

fn layered() -> Policy {
    Policy::layered().expect("Chirp's rule file loads")
}

fn per_ip() -> Policy {
    Policy::per_ip(100).expect("the per-IP policy loads")
}

/// How many windows of `window` the span from 0 to `duration` touches (windows are aligned to
/// the simulation's start, which is midnight).
fn windows_touched(duration: Duration, window: Duration) -> u64 {
    (duration.as_micros().div_ceil(window.as_micros())) as u64
}

#[test]
fn the_sign_up_wave_gets_through_a_per_ip_limit_and_the_layered_limits_hold_it_to_their_bound() {
    let wave = Wave {
        attempts: 3_000,
        hours: 2.0,
        ..Wave::default()
    };
    let scenario = Scenario::Wave(wave.clone());

    let naive = run(&scenario, &per_ip()).score;
    assert!(naive.attacker_requests > 2_800, "{naive:?}");
    assert!(
        naive.accounts_created * 10 >= naive.attacker_requests * 9,
        "a per-IP limit of 100 a minute lets the wave through: {naive:?}"
    );

    let policy = layered();
    let layered = run(&scenario, &policy).score;
    let duration = Duration::from_secs_f64(wave.hours * 3_600.0);
    let per_device = policy.quota("signups-per-device").expect("a device limit");
    let per_block = policy.quota("signups-per-ip-block").expect("a block limit");
    let device_bound = wave.devices
        * per_device.limit()
        * windows_touched(duration, per_device.window().expect("a window"));
    let block_bound = wave.blocks
        * per_block.limit()
        * windows_touched(duration, per_block.window().expect("a window"));
    let bound = device_bound.min(block_bound);
    assert!(
        layered.accounts_created <= bound,
        "the wave created {} accounts, more than the bound {bound} (devices {device_bound}, \
         blocks {block_bound})",
        layered.accounts_created
    );
    assert!(
        layered.accounts_created > 0,
        "real limits, not a wall: {layered:?}"
    );
    assert_eq!(
        layered.innocents_blocked, 0,
        "real sign-ups go through: {layered:?}"
    );
}

#[test]
fn the_layered_limits_hold_a_looping_partner_to_its_quota_within_a_second() {
    let scenario = Scenario::Partner(PartnerLoop {
        quiet_minutes: 0.25,
        loop_minutes: 0.25,
        users: 50,
        ..PartnerLoop::default()
    });
    let policy = layered();
    let quota = policy.quota("partner-api").expect("a partner rule");
    let per_second = quota.limit() as f64;

    let score = run(&scenario, &policy).score;
    let stopped = score
        .loop_stopped_after_micros
        .expect("the loop is refused");
    assert!(stopped <= 1_000_000, "first refused after {stopped} µs");
    let held = score.loop_admitted_per_second.expect("a loop");
    assert!(
        (held - per_second).abs() <= per_second * 0.05,
        "held to {held} a second, not about {per_second}"
    );

    let unlimited = run(&scenario, &Policy::none().expect("no limits")).score;
    assert_eq!(unlimited.loop_stopped_after_micros, None);
    assert_eq!(unlimited.attackers_let_through, unlimited.attacker_requests);
}

#[test]
fn a_per_ip_limit_blocks_the_crowd_behind_a_carriers_nat_and_the_layered_limits_block_no_one() {
    let scenario = Scenario::Crowd(Crowd {
        users: 5_000,
        addresses: 8,
        minutes: 6.0,
        habits: Habits::default(),
    });

    let naive = run(&scenario, &per_ip()).score;
    assert!(naive.innocents > 500, "{naive:?}");
    assert!(
        naive.innocents_blocked * 2 > naive.innocents,
        "most of the crowd is blocked by a per-IP limit: {naive:?}"
    );

    let layered = run(&scenario, &layered()).score;
    assert_eq!(
        layered.innocents, naive.innocents,
        "the same traffic for every policy"
    );
    assert_eq!(layered.innocents_blocked, 0, "{layered:?}");
    assert_eq!(layered.innocent_requests_refused, 0);
}

#[test]
fn during_an_outage_each_rule_fails_as_its_policy_says_and_the_report_shows_both_costs() {
    let scenario = Scenario::Outage(OutageAndFraud {
        attack: OtpAttack {
            hours: 4.0 / 60.0,
            ..OtpAttack::default()
        },
        outage_from_minute: 1.0,
        outage_minutes: 2.0,
        users: 300,
        codes: RealCodes {
            per_hour: 3_600.0,
            ..RealCodes::default()
        },
        ..OutageAndFraud::default()
    });
    let policy = layered();
    let outcome = run(&scenario, &policy);
    let rule = |id: &str| {
        outcome
            .outage_of(id)
            .unwrap_or_else(|| panic!("{id} was asked during the outage: {:?}", outcome.outage))
    };

    // One-time codes count in the gateway's memory while the store is down (local): the
    // fraud gets no more than a range's quota in each of its ranges from the empty local count,
    // and no real person asking for a code meanwhile is refused (the cost closing had).
    let attack = OtpAttack::default();
    let per_range = policy.quota("sms-per-range").expect("a range limit");
    for id in [
        "otp-global",
        "sms-per-range",
        "sms-per-phone",
        "sms-per-address",
    ] {
        assert_eq!(rule(id).on_failure, Some(OnStoreFailure::Local), "{id}");
    }
    let codes = rule("sms-per-range");
    assert!(codes.attacker_requests > 0);
    assert!(
        codes.attackers_let_through <= per_range.limit() * attack.ranges,
        "{codes:?}"
    );
    assert!(codes.innocent_requests > 0);
    assert_eq!(outcome.score.real_codes_refused, 0, "{:?}", outcome.score);

    // Reading fails open: nobody is refused a feed because the store is down.
    let reads = rule("reads");
    assert_eq!(reads.on_failure, Some(OnStoreFailure::Open));
    assert!(reads.innocent_requests > 0);
    assert_eq!(reads.innocents_refused, 0);

    // Outside the outage the same limits hold: nearly every pumped code is stopped.
    assert!(
        outcome.score.pumped_sent_percent() < 5.0,
        "{:?}",
        outcome.score
    );

    // With no limits at all, every fraud code goes out, outage or not.
    let unlimited = run(&scenario, &Policy::none().expect("no limits")).score;
    assert_eq!(unlimited.sms_sent, unlimited.attacker_requests);
    assert!(outcome.score.sms_sent < unlimited.sms_sent);
}

#[test]
fn slow_exports_fill_the_service_past_a_rate_limit_and_a_concurrency_rule_keeps_latency_flat() {
    let slow = SlowExports {
        minutes: 4.0,
        users: 150,
        ..SlowExports::default()
    };
    let scenario = Scenario::Slow(slow.clone());
    let work = slow.request_millis * 1e3;

    let naive = run(&scenario, &per_ip()).score;
    assert_eq!(
        naive.attackers_let_through, naive.attacker_requests,
        "30 exports a minute pass a per-IP limit of 100: {naive:?}"
    );
    let naive_p99 = naive
        .innocent_latency_p99_micros
        .expect("innocents were served");
    assert!(
        naive_p99 as f64 > 100.0 * work,
        "the exports fill the 8 workers and the users queue behind them: {naive:?}"
    );

    let policy = layered();
    let layered = run(&scenario, &policy).score;
    assert_eq!(layered.innocents_blocked, 0, "{layered:?}");
    assert_eq!(
        layered.innocent_latency_p99_micros,
        Some(work as u64),
        "the users never wait for a worker: {layered:?}"
    );
    // At most 2 exports run at once, each 30 s: at most 2 start every 30 s, and 2 more at once.
    let limit = policy
        .quota("exports-in-flight")
        .expect("a concurrency rule")
        .limit();
    let bound = limit * ((slow.minutes * 60.0 / slow.export_seconds) as u64 + 1);
    assert!(
        layered.attackers_let_through <= bound,
        "{} exports let through, at most {bound}: {layered:?}",
        layered.attackers_let_through
    );
    assert!(
        layered.attackers_let_through >= bound - limit,
        "the slots are used: {layered:?}"
    );
}
