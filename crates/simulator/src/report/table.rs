//! The terminal table: one block a scenario, one row a policy.

use std::io::{self, Write};

use tollgate::OnStoreFailure;

use crate::{Outcome, Scenario, story_notes};

/// Writes `scenario`'s parameters, a row per outcome, the outage's per-rule account and the
/// story's notes.
///
/// ```
/// use tollgate_simulator::{Crowd, Policy, Scenario, report::write_table, simulate};
///
/// let crowd = Scenario::Crowd(Crowd { users: 10, minutes: 1.0, ..Crowd::default() });
/// let outcome = simulate(&crowd, &Policy::layered()?, 1, &mut |_| {})?;
/// let mut out = Vec::new();
/// write_table(&mut out, &crowd, &[outcome]).expect("written to memory");
/// assert!(String::from_utf8_lossy(&out).contains("layered"));
/// # Ok::<(), tollgate_simulator::Error>(())
/// ```
pub fn write_table(
    out: &mut dyn Write,
    scenario: &Scenario,
    outcomes: &[Outcome],
) -> io::Result<()> {
    let seed = outcomes.first().map_or(0, |outcome| outcome.seed);
    writeln!(
        out,
        "\n{} — {} (seed {seed})",
        scenario.name(),
        scenario.title()
    )?;
    for (name, value) in scenario.parameters() {
        writeln!(out, "  {name}: {value}")?;
    }
    writeln!(out)?;
    let width = outcomes
        .iter()
        .map(|outcome| outcome.policy.chars().count())
        .fold(14, usize::max);
    writeln!(
        out,
        "  {:<width$} {:>11} {:>11} {:>9} {:>7} {:>18} {:>10} {:>10} {:>8} {:>10} {:>10}",
        "policy",
        "attacks",
        "let through",
        "accounts",
        "SMS",
        "innocents blocked",
        "refused",
        "admitted/s",
        "peak/s",
        "loop stop",
        "loop/s"
    )?;
    for outcome in outcomes {
        let score = &outcome.score;
        let blocked = format!(
            "{}/{} {:.1}%",
            score.innocents_blocked,
            score.innocents,
            score.innocents_blocked_percent()
        );
        let loop_stop = match (scenario.looping(), score.loop_stopped_after_micros) {
            (None, _) => "-".to_owned(),
            (Some(_), None) => "never".to_owned(),
            (Some(_), Some(micros)) => format!("{:.3} s", micros as f64 / 1e6),
        };
        let loop_rate = score
            .loop_admitted_per_second
            .map_or("-".to_owned(), |rate| format!("{rate:.0}"));
        writeln!(
            out,
            "  {:<width$} {:>11} {:>11} {:>9} {:>7} {:>18} {:>10} {:>10.1} {:>8} {:>10} {:>10}",
            outcome.policy,
            score.attacker_requests,
            score.attackers_let_through,
            score.accounts_created,
            score.sms_sent,
            blocked,
            score.innocent_requests_refused,
            score.admitted_mean_per_second,
            score.admitted_peak_per_second,
            loop_stop,
            loop_rate
        )?;
    }
    if scenario.sms_price().is_some() {
        write_codes(out, outcomes)?;
    }
    for outcome in outcomes.iter().filter(|outcome| !outcome.outage.is_empty()) {
        write_outage(out, outcome)?;
    }
    let notes: Vec<String> = outcomes
        .iter()
        .flat_map(|outcome| {
            let delayed = outcome.score.mean_delay_seconds().map(|mean| {
                format!(
                    "{} requests waited for a pacing rule, {mean:.1} s on average (counted when they went through)",
                    outcome.score.delayed
                )
            });
            let score = &outcome.score;
            let latency = score
                .innocent_latency_p50_micros
                .zip(score.innocent_latency_p99_micros)
                .map(|(p50, p99)| {
                    format!(
                        "innocents' latency (arrival to the end of their work): median {:.2} s, 99th percentile {:.2} s",
                        p50 as f64 / 1e6,
                        p99 as f64 / 1e6
                    )
                });
            story_notes(scenario, outcome)
                .into_iter()
                .chain(delayed)
                .chain(latency)
                .map(move |note| format!("{}: {note}", outcome.policy))
        })
        .collect();
    if !notes.is_empty() {
        writeln!(out)?;
        for note in notes {
            writeln!(out, "  {note}")?;
        }
    }
    Ok(())
}

/// One-time codes: per policy, the pumped codes sent (of those asked for), the real people's
/// codes refused and challenged, and the SMS bill.
fn write_codes(out: &mut dyn Write, outcomes: &[Outcome]) -> io::Result<()> {
    let width = outcomes
        .iter()
        .map(|outcome| outcome.policy.chars().count())
        .fold(14, usize::max);
    writeln!(out, "\n  one-time codes:")?;
    writeln!(
        out,
        "    {:<width$} {:>24} {:>22} {:>22} {:>12} {:>12}",
        "policy",
        "pumped sent / asked",
        "real refused",
        "real challenged",
        "pumped bill",
        "whole bill"
    )?;
    let dollars = |bill: Option<f64>| bill.map_or("-".to_owned(), |bill| format!("${bill:.2}"));
    for outcome in outcomes {
        let score = &outcome.score;
        let share = |part: u64, whole: u64, percent: f64| format!("{part}/{whole} {percent:.2}%");
        writeln!(
            out,
            "    {:<width$} {:>24} {:>22} {:>22} {:>12} {:>12}",
            outcome.policy,
            share(
                score.sms_sent,
                score.pumped_asked,
                score.pumped_sent_percent()
            ),
            share(
                score.real_codes_refused,
                score.real_codes_asked,
                score.real_codes_refused_percent()
            ),
            share(
                score.real_codes_challenged,
                score.real_codes_asked,
                score.real_codes_challenged_percent()
            ),
            dollars(outcome.pumped_bill()),
            dollars(outcome.total_bill())
        )?;
    }
    Ok(())
}

/// While the store was down: per rule, what its failure policy let through or refused, and
/// what the other choice would have cost.
fn write_outage(out: &mut dyn Write, outcome: &Outcome) -> io::Result<()> {
    writeln!(out, "\n  while the store was down ({}):", outcome.policy)?;
    writeln!(
        out,
        "    {:<28} {:>10} {:>9} {:>10} {:>14} {:>14}",
        "rule", "on failure", "attacks", "innocent", "attacks in", "innocents out"
    )?;
    for rule in &outcome.outage {
        let policy = match rule.on_failure {
            Some(OnStoreFailure::Closed) => "closed",
            Some(OnStoreFailure::Open) => "open",
            Some(OnStoreFailure::OpenWithin(_)) => "open within",
            Some(OnStoreFailure::Local) => "local",
            None => "?",
        };
        writeln!(
            out,
            "    {:<28} {:>10} {:>9} {:>10} {:>14} {:>14}",
            rule.rule.as_str(),
            policy,
            rule.attacker_requests,
            rule.innocent_requests,
            rule.attackers_let_through,
            rule.innocents_refused
        )?;
    }
    writeln!(
        out,
        "    (failing open lets every attack it is asked about in; failing closed refuses every \
         innocent request: the columns show both costs)"
    )
}
