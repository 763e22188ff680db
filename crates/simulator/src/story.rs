//! The simulator's story — what each policy was expected to do in each scenario, written down
//! before any simulation ran — set against what the simulation found. Numbers are never tuned
//! to match it: where they differ, the report says so.

use crate::{Outcome, PolicyKind, Scenario};

/// Notes comparing `outcome` (of a policy in `scenario`) with the story. Its trouble: a wave of
/// 40,000 scripted sign-ups in 8 hours from rented cloud addresses, a partner's job looping at
/// 5,000 requests a second for an hour, 5,000 real users behind a carrier's NAT, and slow
/// exports. Its claims: a per-IP limit lets the sign-up wave through and blocks the crowd behind
/// the NAT; Chirp's layered limits let the wave create 61 accounts, stop the partner's loop
/// within a second and block no one in the crowd; with slow exports, a rate limit alone lets one
/// account fill the service while Chirp's concurrency rule keeps everyone else's latency flat.
/// Each note starts "as the story says" or "differs from the story".
///
/// ```
/// use tollgate_simulator::{Crowd, Policy, Scenario, simulate, story_notes};
///
/// let crowd = Scenario::Crowd(Crowd { users: 5_000, minutes: 2.0, ..Crowd::default() });
/// let outcome = simulate(&crowd, &Policy::per_ip(100)?, 3, &mut |_| {})?;
/// let notes = story_notes(&crowd, &outcome);
/// assert!(notes[0].starts_with("as the story says"));
/// # Ok::<(), tollgate_simulator::Error>(())
/// ```
pub fn story_notes(scenario: &Scenario, outcome: &Outcome) -> Vec<String> {
    let score = &outcome.score;
    let blocked = format!(
        "{} of {} innocent callers were refused at least once",
        score.innocents_blocked, score.innocents
    );
    let agrees = |holds: bool, claim: &str, found: String| {
        if holds {
            format!("as the story says, {claim}: {found}")
        } else {
            format!("differs from the story ({claim}): {found}")
        }
    };
    let mut notes = Vec::new();
    match (scenario, outcome.kind) {
        (Scenario::Wave(_), PolicyKind::PerIp) => notes.push(agrees(
            score.attackers_let_through * 2 >= score.attacker_requests,
            "the wave gets through a per-IP limit",
            format!(
                "{} accounts created of {} attempts",
                score.accounts_created, score.attacker_requests
            ),
        )),
        (Scenario::Wave(_), PolicyKind::Layered) => {
            notes.push(format!(
                "the wave created {} accounts (the story: 61)",
                score.accounts_created
            ));
            if score.innocents_blocked > 0 {
                notes.push(agrees(false, "real sign-ups go through", blocked));
            }
        }
        (Scenario::Partner(_), PolicyKind::Layered) => {
            let stopped = score.loop_stopped_after_micros;
            notes.push(agrees(
                stopped.is_some_and(|micros| micros <= 1_000_000),
                "the layered limits stop the loop within a second",
                match stopped {
                    Some(micros) => match score.loop_admitted_per_second {
                        Some(rate) => format!(
                            "first refused after {:.3} s, then held to {rate:.0} a second",
                            micros as f64 / 1e6
                        ),
                        None => format!(
                            "first refused after {:.3} s (too short a loop to measure a rate)",
                            micros as f64 / 1e6
                        ),
                    },
                    None => "never refused".to_owned(),
                },
            ));
        }
        (Scenario::Partner(_), PolicyKind::PerIp) => notes.push(agrees(
            score.innocents_blocked == 0,
            "a per-IP limit does badly on only two of the three",
            blocked,
        )),
        (Scenario::Crowd(_), PolicyKind::PerIp) => notes.push(agrees(
            score.innocents_blocked > 0,
            "a per-IP limit blocks the crowd",
            blocked,
        )),
        (Scenario::Slow(_), kind @ (PolicyKind::Layered | PolicyKind::PerIp)) => {
            let p99 = score.innocent_latency_p99_micros.unwrap_or(0);
            let found = format!(
                "innocents' 99th percentile latency {:.2} s; {}",
                p99 as f64 / 1e6,
                blocked
            );
            notes.push(if kind == PolicyKind::Layered {
                agrees(
                    p99 <= 1_000_000 && score.innocents_blocked == 0,
                    "a concurrency rule keeps the innocents' latency flat and refuses none of them",
                    found,
                )
            } else {
                agrees(
                    p99 > 10_000_000,
                    "a rate limit alone lets one account's slow exports fill the service",
                    found,
                )
            });
        }
        (Scenario::Crowd(_), PolicyKind::Layered) => notes.push(agrees(
            score.innocents_blocked == 0,
            "the layered limits block no one in the crowd",
            blocked,
        )),
        _ => {}
    }
    notes
}
