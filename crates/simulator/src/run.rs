//! One simulation: a scenario's traffic through Chirp's router and the real layer, one service
//! call a visit, on a manual clock.

use axum::body::Body;
use axum::http::{Response, StatusCode, header};
use std::sync::{Arc, Mutex};
use tollgate::core::testing::ManualClock;

use tollgate::{FallbackStore, MemoryStore, RuleId, Store, Timestamp};
use tower::Service;

use crate::outage::OutageStore;
use crate::outcome::{Answer, Outcome, Tally};
use crate::serving::Serving;
use crate::{Error, Policy, Scenario};

/// When every simulation starts: 2026-12-01 00:00 UTC (windows of an hour or a day start
/// with the scenario).
pub const START: Timestamp = Timestamp::from_secs(1_796_083_200);

/// Whether an answer is the policy refusing, whatever its status: every refusal of the layer
/// and of a typed limit (`429`, a rule failing closed with `503`, a missing key refused with the
/// rule's own status) and Chirp's sign-up challenge (`403`) carry a problem body
/// (`application/problem+json`); Chirp's handlers answer their own errors (a wrong password's
/// `401`, an unreadable body's `422`) in plain text. Anything else went through the limits.
pub(crate) fn is_refusal<B>(response: &Response<B>) -> bool {
    let problem = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|kind| kind.as_bytes().starts_with(b"application/problem+json"));
    problem && (response.status().is_client_error() || response.status().is_server_error())
}

/// What became of a request: let through, challenged (Chirp's `403` with a problem body: its
/// only `403`), or refused.
fn answer<B>(response: &Response<B>) -> Answer {
    if !is_refusal(response) {
        Answer::Admitted
    } else if response.status() == StatusCode::FORBIDDEN {
        Answer::Challenged
    } else {
        Answer::Refused
    }
}

/// Runs `scenario` against `policy` with the traffic of `seed`, deterministically: a
/// current-thread runtime with paused time, the store on a manual clock set to each visit's
/// time, no socket. `progress` is told the simulated time (µs) now and then.
///
/// ```
/// use tollgate_simulator::{Crowd, Policy, Scenario, simulate};
///
/// let crowd = Scenario::Crowd(Crowd { users: 20, minutes: 2.0, ..Crowd::default() });
/// let outcome = simulate(&crowd, &Policy::layered()?, 1, &mut |_| {})?;
/// assert_eq!(outcome.score.innocents_blocked, 0);
/// # Ok::<(), tollgate_simulator::Error>(())
/// ```
pub fn simulate(
    scenario: &Scenario,
    policy: &Policy,
    seed: u64,
    progress: &mut dyn FnMut(u64),
) -> Result<Outcome, Error> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(Error::Runtime)?;
    runtime.block_on(drive(scenario, policy, seed, progress))
}

/// The rule a `429` names as the one that refused (its problem body's `policy`), if it names
/// one: while the store is down, a rule counting in the gateway's memory refused it.
async fn refusing_policy(response: Response<Body>) -> Option<String> {
    if response.status() != StatusCode::TOO_MANY_REQUESTS {
        return None;
    }
    let body = axum::body::to_bytes(response.into_body(), 64 * 1024)
        .await
        .ok()?;
    let problem: serde_json::Value = serde_json::from_slice(&body).ok()?;
    problem.get("policy")?.as_str().map(str::to_owned)
}

/// Builds the store: the memory store on the manual clock, failing during the scenario's
/// outage; with an outage, behind a `FallbackStore` as Chirp's Redis deployment has it, so
/// `local` and `open_within` rules count in the gateway's memory while the store is down.
async fn drive(
    scenario: &Scenario,
    policy: &Policy,
    seed: u64,
    progress: &mut dyn FnMut(u64),
) -> Result<Outcome, Error> {
    let clock = ManualClock::new(START);
    let memory = MemoryStore::builder().clock(clock.clone()).build();
    let Some(outage) = scenario.outage() else {
        let store = OutageStore::new(memory, clock.clone(), 0..0, Vec::new());
        let asked = store.asked();
        return play(scenario, policy, seed, progress, &clock, store, asked).await;
    };
    let down = START.as_micros() + outage.start..START.as_micros() + outage.end;
    let failing = OutageStore::new(memory, clock.clone(), down, policy.typed_limits_off());
    let asked = failing.asked();
    // As Chirp's gateway with REDIS_URL, except that the breaker never opens: every call asks
    // the store (which fails at once), so the store is back the moment the outage ends and
    // the rules a policy does not have are never answered by a failure policy.
    let store = FallbackStore::builder(failing)
        .clock(clock.clone())
        .timeout(std::time::Duration::from_millis(50))
        .failure_threshold(u32::MAX)
        .build();
    play(scenario, policy, seed, progress, &clock, store, asked).await
}

/// Plays the scenario's visits through Chirp's router over `store`, one call each.
async fn play<St: Store>(
    scenario: &Scenario,
    policy: &Policy,
    seed: u64,
    progress: &mut dyn FnMut(u64),
    clock: &ManualClock,
    store: St,
    asked: Arc<Mutex<Vec<RuleId>>>,
) -> Result<Outcome, Error> {
    let failure_policies = policy.failure_policies();
    let layer = policy.layer(store)?;
    // A router is always ready: each visit is one call.
    let mut app = chirp::app(&layer);
    let mut tally = Tally::new(scenario.duration_micros(), scenario.looping());
    let mut serving = scenario.service().map(Serving::new);
    let mut reported = 0;
    for visit in scenario.timeline(seed) {
        clock.set(START.saturating_add_micros(visit.at));
        if let Some(serving) = &mut serving {
            serving.end_until(visit.at);
        }
        let request = visit.call.request(visit.from);
        // A pacing rule delays a request with a tokio sleep: in paused time it passes at once,
        // and the time it moved is the delay (rounded up to a millisecond by tokio's timer).
        // The manual clock stays at the arrival: the handler behind a paced request runs at
        // its arrival time (visits are played one after another), a known approximation.
        let called = tokio::time::Instant::now();
        let Ok(response) = app.call(request).await;
        let delay = u64::try_from(called.elapsed().as_micros()).unwrap_or(u64::MAX);
        let answer = answer(&response);
        let refused = answer != Answer::Admitted;
        tally.record(&visit, answer, delay);
        let response = match &mut serving {
            Some(serving) if !refused => {
                let start = visit.at.saturating_add(delay);
                let latency = serving.serve(start, &visit.call, response);
                tally.record_latency(&visit, delay.saturating_add(latency));
                None
            }
            _ => Some(response),
        };
        let rules: Vec<_> = asked
            .lock()
            .map(|mut asked| asked.drain(..).collect())
            .unwrap_or_default();
        if !rules.is_empty() {
            let refused_by = match response {
                Some(response) if refused => refusing_policy(response).await,
                _ => None,
            };
            tally.record_outage(&visit, rules, refused, refused_by, &failure_policies);
        }
        if visit.at >= reported + 1_000_000 {
            reported = visit.at;
            progress(visit.at);
        }
    }
    progress(scenario.duration_micros());
    Ok(tally.finish(scenario, policy, seed))
}
