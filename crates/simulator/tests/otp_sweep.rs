//! Chirp's layered code policy under SMS pumping attacks it was not tuned to: a seeded sweep of
//! attacker parameters over the ranges a real pumping attack takes (tens to thousands of
//! addresses, hundreds to tens of thousands of numbers in a few to a hundred ranges, 5 to 100
//! codes a second, 30 minutes to several hours), each run as long as its attack in virtual
//! time, in normal times and through the outage scenario's store outage. The worst case must
//! stay within the target: at least 95 % of the pumped codes stopped, at most 1 % of real
//! people's codes refused and at most 5 % challenged.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tollgate_simulator::{OtpAttack, OtpFraud, OutageAndFraud, Policy, Scenario, Score, simulate};

/// The sweep's seed: the attacks drawn, and each run's traffic.
const SEED: u64 = 42;

/// Random draws besides the corners.
const DRAWS: usize = 12;

/// A number from `low` to `high`, evenly on a log scale.
fn log_uniform(random: &mut ChaCha8Rng, low: f64, high: f64) -> f64 {
    (low.ln() + random.random::<f64>() * (high.ln() - low.ln())).exp()
}

/// An attack drawn from the ranges a real one takes.
fn draw(random: &mut ChaCha8Rng) -> OtpAttack {
    let ranges = log_uniform(random, 3.0, 100.0).round() as u64;
    let numbers =
        (log_uniform(random, 100.0, 30_000.0).round() as u64).clamp(ranges, ranges * 10_000);
    let addresses = log_uniform(random, 10.0, 5_000.0).round() as u64;
    let least_blocks = addresses.div_ceil(254);
    let blocks = (log_uniform(random, least_blocks as f64, addresses.min(512) as f64).round()
        as u64)
        .clamp(least_blocks, 512);
    let signs_up = [0, 0, 1, 5, 50][random.random_range(0..5)];
    OtpAttack {
        per_second: log_uniform(random, 5.0, 100.0),
        addresses,
        blocks,
        numbers,
        ranges,
        signs_up,
        hours: log_uniform(random, 0.5, 4.0),
    }
}

/// The corners: where a per-range limit leaks most (the slowest attack over the most ranges,
/// as short as an attack is), the fastest from the fewest addresses, and a long one spread
/// wide that signs up an account per code.
fn corners() -> Vec<OtpAttack> {
    vec![
        OtpAttack {
            per_second: 5.0,
            addresses: 3_000,
            blocks: 512,
            numbers: 10_000,
            ranges: 100,
            signs_up: 0,
            hours: 0.5,
        },
        OtpAttack {
            per_second: 100.0,
            addresses: 10,
            blocks: 1,
            numbers: 300,
            ranges: 3,
            signs_up: 0,
            hours: 0.5,
        },
        OtpAttack {
            per_second: 5.0,
            addresses: 5_000,
            blocks: 512,
            numbers: 30_000,
            ranges: 100,
            signs_up: 1,
            hours: 4.0,
        },
    ]
}

/// What one run found, for the worst-case report.
struct Found {
    scenario: &'static str,
    attack: OtpAttack,
    score: Score,
}

#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "minutes of simulation unoptimised: scripts/test runs it in release, \
              `cargo test --release -p tollgate-simulator --test otp_sweep`"
)]
fn the_layered_policy_stops_pumping_it_was_not_tuned_to_and_spares_real_people() {
    let policy = Policy::layered().expect("Chirp's rule file loads");
    let mut random = ChaCha8Rng::seed_from_u64(SEED);
    let mut attacks = corners();
    attacks.extend((0..DRAWS).map(|_| draw(&mut random)));
    let mut found = Vec::new();
    for attack in attacks {
        assert_eq!(attack.problem(), None, "{attack:?}");
        let otp = Scenario::Otp(OtpFraud {
            attack: attack.clone(),
            ..OtpFraud::default()
        });
        // The outage scenario as it is, with fewer people browsing (their reads meet no code
        // rule) and the store down from minute 10 to 15 of the attack.
        let outage = Scenario::Outage(OutageAndFraud {
            attack: attack.clone(),
            users: 50,
            ..OutageAndFraud::default()
        });
        for scenario in [otp, outage] {
            let started = std::time::Instant::now();
            let outcome = simulate(&scenario, &policy, SEED, &mut |_| {}).expect("it runs");
            eprintln!(
                "{} {:?}: {} requests in {:.1} s; pumped sent {:.2}%, real refused {:.2}%, challenged {:.2}%",
                outcome.scenario,
                attack,
                outcome.score.requests,
                started.elapsed().as_secs_f64(),
                outcome.score.pumped_sent_percent(),
                outcome.score.real_codes_refused_percent(),
                outcome.score.real_codes_challenged_percent()
            );
            found.push(Found {
                scenario: outcome.scenario,
                attack: attack.clone(),
                score: outcome.score,
            });
        }
    }
    let worst = |measure: fn(&Score) -> f64| {
        found
            .iter()
            .max_by(|a, b| measure(&a.score).total_cmp(&measure(&b.score)))
            .expect("runs")
    };
    let report = |what: &str, found: &Found, value: f64| {
        eprintln!(
            "worst {what}: {value:.2}% in {} with {:?}",
            found.scenario, found.attack
        );
    };
    let leaked = worst(Score::pumped_sent_percent);
    let refused = worst(Score::real_codes_refused_percent);
    let challenged = worst(Score::real_codes_challenged_percent);
    report(
        "pumped codes sent",
        leaked,
        leaked.score.pumped_sent_percent(),
    );
    report(
        "real codes refused",
        refused,
        refused.score.real_codes_refused_percent(),
    );
    report(
        "real codes challenged",
        challenged,
        challenged.score.real_codes_challenged_percent(),
    );
    for run in &found {
        assert!(run.score.pumped_asked > 0 && run.score.real_codes_asked > 0);
    }
    assert!(
        leaked.score.pumped_sent_percent() <= 5.0,
        "at least 95% of pumped codes stopped: {:?} in {} let {} of {} through",
        leaked.attack,
        leaked.scenario,
        leaked.score.sms_sent,
        leaked.score.pumped_asked
    );
    assert!(
        refused.score.real_codes_refused_percent() <= 1.0,
        "at most 1% of real codes refused: {:?} in {}: {:?}",
        refused.attack,
        refused.scenario,
        refused.score
    );
    assert!(
        challenged.score.real_codes_challenged_percent() <= 5.0,
        "at most 5% of real codes challenged: {:?} in {}: {:?}",
        challenged.attack,
        challenged.scenario,
        challenged.score
    );
}
