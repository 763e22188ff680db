//! The CSV: one row a scenario and policy, every figure of the score.

use std::io::{self, Write};

use crate::Outcome;

/// The CSV's columns.
const COLUMNS: [&str; 29] = [
    "scenario",
    "policy",
    "seed",
    "requests",
    "attacker_requests",
    "attackers_let_through",
    "accounts_created",
    "sms_sent",
    "innocents",
    "innocents_blocked",
    "innocents_blocked_percent",
    "innocent_requests_refused",
    "admitted_mean_per_second",
    "admitted_peak_per_second",
    "loop_stopped_after_seconds",
    "loop_admitted_per_second",
    "delayed",
    "mean_delay_seconds",
    "innocent_latency_p50_seconds",
    "innocent_latency_p99_seconds",
    "pumped_asked",
    "pumped_sent_percent",
    "real_codes_asked",
    "real_codes_refused",
    "real_codes_refused_percent",
    "real_codes_challenged",
    "real_codes_challenged_percent",
    "pumped_bill",
    "whole_bill",
];

/// Writes a header and one row per outcome (figures with fixed decimals, so equal runs give
/// equal bytes; an empty cell where a figure does not apply).
///
/// ```
/// use tollgate_simulator::{Crowd, Policy, Scenario, report::write_csv, simulate};
///
/// let crowd = Scenario::Crowd(Crowd { users: 10, minutes: 1.0, ..Crowd::default() });
/// let outcome = simulate(&crowd, &Policy::none()?, 1, &mut |_| {})?;
/// let mut out = Vec::new();
/// write_csv(&mut out, &[outcome]).expect("written to memory");
/// assert!(String::from_utf8_lossy(&out).starts_with("scenario,policy,seed,"));
/// # Ok::<(), tollgate_simulator::Error>(())
/// ```
pub fn write_csv(out: &mut dyn Write, outcomes: &[Outcome]) -> io::Result<()> {
    let mut writer = csv::Writer::from_writer(out);
    writer.write_record(COLUMNS)?;
    for outcome in outcomes {
        let score = &outcome.score;
        writer.write_record([
            outcome.scenario.to_owned(),
            outcome.policy.clone(),
            outcome.seed.to_string(),
            score.requests.to_string(),
            score.attacker_requests.to_string(),
            score.attackers_let_through.to_string(),
            score.accounts_created.to_string(),
            score.sms_sent.to_string(),
            score.innocents.to_string(),
            score.innocents_blocked.to_string(),
            format!("{:.2}", score.innocents_blocked_percent()),
            score.innocent_requests_refused.to_string(),
            format!("{:.2}", score.admitted_mean_per_second),
            score.admitted_peak_per_second.to_string(),
            score
                .loop_stopped_after_micros
                .map_or(String::new(), |micros| {
                    format!("{:.6}", micros as f64 / 1e6)
                }),
            score
                .loop_admitted_per_second
                .map_or(String::new(), |rate| format!("{rate:.2}")),
            score.delayed.to_string(),
            score
                .mean_delay_seconds()
                .map_or(String::new(), |seconds| format!("{seconds:.6}")),
            seconds(score.innocent_latency_p50_micros),
            seconds(score.innocent_latency_p99_micros),
            score.pumped_asked.to_string(),
            format!("{:.2}", score.pumped_sent_percent()),
            score.real_codes_asked.to_string(),
            score.real_codes_refused.to_string(),
            format!("{:.2}", score.real_codes_refused_percent()),
            score.real_codes_challenged.to_string(),
            format!("{:.2}", score.real_codes_challenged_percent()),
            dollars(outcome.pumped_bill()),
            dollars(outcome.total_bill()),
        ])?;
    }
    writer.flush()
}

/// A bill with two decimals; empty where the scenario bills no codes.
fn dollars(bill: Option<f64>) -> String {
    bill.map_or(String::new(), |bill| format!("{bill:.2}"))
}

/// µs as seconds with six decimals; empty when the figure does not apply.
fn seconds(micros: Option<u64>) -> String {
    micros.map_or(String::new(), |micros| {
        format!("{:.6}", micros as f64 / 1e6)
    })
}
