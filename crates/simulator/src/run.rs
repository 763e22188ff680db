//! One simulation: a scenario's traffic through Chirp's router and the real layer, one service
//! call a visit, on a manual clock.

use axum::http::{Response, header};
use tollgate::core::testing::ManualClock;
use tollgate::{MemoryStore, Timestamp};
use tower::Service;

use crate::outage::OutageStore;
use crate::outcome::{Outcome, Tally};
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

async fn drive(
    scenario: &Scenario,
    policy: &Policy,
    seed: u64,
    progress: &mut dyn FnMut(u64),
) -> Result<Outcome, Error> {
    let clock = ManualClock::new(START);
    let down = scenario.outage().map_or(0..0, |outage| {
        START.as_micros() + outage.start..START.as_micros() + outage.end
    });
    let memory = MemoryStore::builder().clock(clock.clone()).build();
    let store = OutageStore::new(memory, clock.clone(), down, policy.typed_limits_off());
    let asked = store.asked();
    let failure_policies = policy.failure_policies();
    let layer = policy.layer(store)?;
    // A router is always ready: each visit is one call.
    let mut app = chirp::app(&layer);
    let mut tally = Tally::new(scenario.duration_micros(), scenario.looping());
    let mut reported = 0;
    for visit in scenario.timeline(seed) {
        clock.set(START.saturating_add_micros(visit.at));
        let request = visit.call.request(visit.from);
        let Ok(response) = app.call(request).await;
        let refused = is_refusal(&response);
        tally.record(&visit, refused);
        let rules: Vec<_> = asked
            .lock()
            .map(|mut asked| asked.drain(..).collect())
            .unwrap_or_default();
        if !rules.is_empty() {
            tally.record_outage(&visit, rules, refused, &failure_policies);
        }
        if visit.at >= reported + 1_000_000 {
            reported = visit.at;
            progress(visit.at);
        }
    }
    progress(scenario.duration_micros());
    Ok(tally.finish(scenario.name(), policy, seed))
}
