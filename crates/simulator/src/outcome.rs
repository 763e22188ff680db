//! What a policy did in a scenario: the score, second by second traffic, and the outage's
//! per-rule account.

use std::collections::{BTreeMap, HashSet};

use tollgate::{OnStoreFailure, RuleId};

use crate::PolicyKind;
use crate::visit::{Call, Side, Visit};

/// One simulated second: requests admitted and refused, innocents' and attackers'.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Second {
    /// Innocent requests let through.
    pub innocent_admitted: u32,
    /// Innocent requests refused.
    pub innocent_refused: u32,
    /// Attackers' requests let through.
    pub attacker_admitted: u32,
    /// Attackers' requests refused.
    pub attacker_refused: u32,
    /// Innocent requests served where the service's work is modelled (scenarios whose requests
    /// overlap), and their latencies added up, µs.
    pub innocent_served: u32,
    /// See [`innocent_served`](Self::innocent_served).
    pub innocent_latency_micros: u64,
    /// One-time codes sent to the attacker's numbers (pumped).
    pub pumped_sent: u32,
    /// One-time codes sent to real people.
    pub real_codes_sent: u32,
}

impl Second {
    /// All requests let through in this second.
    pub fn admitted(&self) -> u32 {
        self.innocent_admitted + self.attacker_admitted
    }

    /// The innocent requests' mean latency, seconds (`None`: none served, or the scenario does
    /// not model the service's work).
    pub fn innocent_latency_seconds(&self) -> Option<f64> {
        (self.innocent_served > 0)
            .then(|| self.innocent_latency_micros as f64 / 1e6 / f64::from(self.innocent_served))
    }
}

/// While the store was down, what one rule's failure policy did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleInOutage {
    /// The rule (or typed limit).
    pub rule: RuleId,
    /// What it does while the store is down (`None`: not known to the policy).
    pub on_failure: Option<OnStoreFailure>,
    /// Attackers' requests it was asked about.
    pub attacker_requests: u64,
    /// Innocent requests it was asked about.
    pub innocent_requests: u64,
    /// Of the attackers' requests, those let through.
    pub attackers_let_through: u64,
    /// Of the innocent requests, those it refused: a refusal while the store is down is charged
    /// to the rule its `429` names, else to the closed rules the request met (their `503`
    /// names none), else to those counting locally; never to an open one.
    pub innocents_refused: u64,
}

/// The score of a policy in a scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Score {
    /// Every request sent.
    pub requests: u64,
    /// Attackers' requests sent.
    pub attacker_requests: u64,
    /// Of those, let through.
    pub attackers_let_through: u64,
    /// Accounts the attackers created (sign-ups let through).
    pub accounts_created: u64,
    /// Codes sent to the attackers' numbers (code requests let through).
    pub sms_sent: u64,
    /// Codes the attackers asked for (of which [`sms_sent`](Self::sms_sent) were sent).
    pub pumped_asked: u64,
    /// Codes real people asked for (each ask, a retry too).
    pub real_codes_asked: u64,
    /// Of those, refused (any refusal but a challenge).
    pub real_codes_refused: u64,
    /// Of those, answered with a challenge (`403`): a person can solve it and have the code,
    /// which the simulation does not play.
    pub real_codes_challenged: u64,
    /// Innocent callers (people, partners' normal traffic) who sent anything.
    pub innocents: u64,
    /// Of those, refused at least once.
    pub innocents_blocked: u64,
    /// Innocent requests refused.
    pub innocent_requests_refused: u64,
    /// Requests let through in the busiest second.
    pub admitted_peak_per_second: u64,
    /// Requests let through a second, on average over the scenario.
    pub admitted_mean_per_second: f64,
    /// How long after a partner's loop started it was first refused (µs): `None` when it never
    /// was, or there is no loop.
    pub loop_stopped_after_micros: Option<u64>,
    /// Requests a pacing rule delayed (and then let through).
    pub delayed: u64,
    /// Their delays, added up (µs).
    pub delay_total_micros: u64,
    /// The loop's requests let through a second, on average over its whole seconds after the
    /// first (`None` when there is no loop, or no such second).
    pub loop_admitted_per_second: Option<f64>,
    /// Where the service's work is modelled: the innocent requests' median latency, µs
    /// (arrival to the end of their work).
    pub innocent_latency_p50_micros: Option<u64>,
    /// The same, 99th percentile.
    pub innocent_latency_p99_micros: Option<u64>,
}

impl Score {
    /// The mean delay of the requests a pacing rule delayed, in seconds (`None`: none was).
    pub fn mean_delay_seconds(&self) -> Option<f64> {
        (self.delayed > 0).then(|| self.delay_total_micros as f64 / 1e6 / self.delayed as f64)
    }

    /// Codes sent to the attackers' numbers, in percent of those they asked for.
    pub fn pumped_sent_percent(&self) -> f64 {
        percent(self.sms_sent, self.pumped_asked)
    }

    /// Real people's codes refused, in percent of those asked for.
    pub fn real_codes_refused_percent(&self) -> f64 {
        percent(self.real_codes_refused, self.real_codes_asked)
    }

    /// Real people's codes challenged, in percent of those asked for.
    pub fn real_codes_challenged_percent(&self) -> f64 {
        percent(self.real_codes_challenged, self.real_codes_asked)
    }

    /// Codes sent to real people.
    pub fn real_codes_sent(&self) -> u64 {
        self.real_codes_asked - self.real_codes_refused - self.real_codes_challenged
    }

    /// Innocent callers blocked at least once, in percent of those who sent anything.
    pub fn innocents_blocked_percent(&self) -> f64 {
        if self.innocents == 0 {
            0.0
        } else {
            self.innocents_blocked as f64 * 100.0 / self.innocents as f64
        }
    }
}

/// `part` in percent of `whole` (0 of nothing).
fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// What became of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// Let through (after a pacing rule's delay, if any).
    Admitted,
    /// Answered with a challenge (`403`).
    Challenged,
    /// Refused otherwise.
    Refused,
}

/// Everything one simulation found.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The scenario's short name.
    pub scenario: &'static str,
    /// The policy's name.
    pub policy: String,
    /// Which policy it is.
    pub kind: PolicyKind,
    /// The seed.
    pub seed: u64,
    /// The score.
    pub score: Score,
    /// Second by second.
    pub seconds: Vec<Second>,
    /// While the store was down, rule by rule (empty when it never was).
    pub outage: Vec<RuleInOutage>,
    /// What one code cost, where the scenario bills codes.
    pub sms_price: Option<f64>,
}

impl Outcome {
    /// While the store was down, what `rule` did (`None`: it was never asked then).
    ///
    /// ```
    /// use tollgate::OnStoreFailure;
    /// use tollgate_simulator::{OtpAttack, OutageAndFraud, Policy, Scenario, simulate};
    ///
    /// let attack = OtpAttack { hours: 1.0 / 60.0, ..OtpAttack::default() };
    /// let outage = Scenario::Outage(OutageAndFraud { attack, outage_from_minute: 0.25,
    ///     outage_minutes: 0.5, users: 10, ..OutageAndFraud::default() });
    /// let outcome = simulate(&outage, &Policy::layered()?, 1, &mut |_| {})?;
    /// let codes = outcome.outage_of("sms-per-range").expect("asked while the store was down");
    /// assert_eq!(codes.on_failure, Some(OnStoreFailure::Local));
    /// assert!(codes.attackers_let_through < codes.attacker_requests);
    /// assert!(outcome.outage_of("no-such-rule").is_none());
    /// # Ok::<(), tollgate_simulator::Error>(())
    /// ```
    pub fn outage_of(&self, rule: &str) -> Option<&RuleInOutage> {
        self.outage.iter().find(|asked| asked.rule.as_str() == rule)
    }

    /// What the codes sent to the attackers' numbers cost, where the scenario bills codes.
    pub fn pumped_bill(&self) -> Option<f64> {
        Some(self.sms_price? * self.score.sms_sent as f64)
    }

    /// What every code sent cost (the attackers' and real people's), where the scenario bills
    /// codes.
    pub fn total_bill(&self) -> Option<f64> {
        let codes = self.score.sms_sent + self.score.real_codes_sent();
        Some(self.sms_price? * codes as f64)
    }
}

/// Counts a simulation's answers as they come.
pub(crate) struct Tally {
    /// Up to the last second anything was sent in.
    seconds: Vec<Second>,
    duration_seconds: u64,
    requests: u64,
    attacker_requests: u64,
    attackers_let_through: u64,
    accounts_created: u64,
    sms_sent: u64,
    pumped_asked: u64,
    real_codes_asked: u64,
    real_codes_refused: u64,
    real_codes_challenged: u64,
    innocents: HashSet<u64>,
    blocked: HashSet<u64>,
    innocent_requests_refused: u64,
    delayed: u64,
    delay_total_micros: u64,
    looping: Option<std::ops::Range<u64>>,
    loop_first_refusal: Option<u64>,
    outage: BTreeMap<RuleId, RuleInOutage>,
    innocent_latencies: Vec<u64>,
}

impl Tally {
    pub(crate) fn new(duration_micros: u64, looping: Option<std::ops::Range<u64>>) -> Self {
        Tally {
            seconds: Vec::new(),
            duration_seconds: duration_micros.div_ceil(1_000_000),
            requests: 0,
            attacker_requests: 0,
            attackers_let_through: 0,
            accounts_created: 0,
            sms_sent: 0,
            pumped_asked: 0,
            real_codes_asked: 0,
            real_codes_refused: 0,
            real_codes_challenged: 0,
            innocents: HashSet::new(),
            blocked: HashSet::new(),
            innocent_requests_refused: 0,
            delayed: 0,
            delay_total_micros: 0,
            looping,
            loop_first_refusal: None,
            outage: BTreeMap::new(),
            innocent_latencies: Vec::new(),
        }
    }

    /// `visit` was let through after `delay` µs (a pacing rule's), or refused (a challenge
    /// too). It counts in the second it went through.
    pub(crate) fn record(&mut self, visit: &Visit, answer: Answer, delay: u64) {
        let refused = answer != Answer::Admitted;
        self.requests += 1;
        if let Call::Otp { .. } = visit.call {
            self.record_code(visit, answer, delay);
        }
        if delay > 0 && !refused {
            self.delayed += 1;
            self.delay_total_micros = self.delay_total_micros.saturating_add(delay);
        }
        let index = (visit.at.saturating_add(delay) / 1_000_000) as usize;
        if index >= self.seconds.len() {
            self.seconds.resize(index + 1, Second::default());
        }
        let second = &mut self.seconds[index];
        match (visit.caller.side, refused) {
            (Side::Innocent, false) => second.innocent_admitted += 1,
            (Side::Innocent, true) => second.innocent_refused += 1,
            (Side::Attacker, false) => second.attacker_admitted += 1,
            (Side::Attacker, true) => second.attacker_refused += 1,
        }
        match visit.caller.side {
            Side::Innocent => {
                self.innocents.insert(visit.caller.id);
                if refused {
                    self.innocent_requests_refused += 1;
                    self.blocked.insert(visit.caller.id);
                }
            }
            Side::Attacker => {
                self.attacker_requests += 1;
                if refused {
                    if self.looping.is_some() && self.loop_first_refusal.is_none() {
                        self.loop_first_refusal = Some(visit.at);
                    }
                } else {
                    self.attackers_let_through += 1;
                    match visit.call {
                        Call::Signup { .. } => self.accounts_created += 1,
                        Call::Otp { .. } => self.sms_sent += 1,
                        _ => {}
                    }
                }
            }
        }
    }

    /// A one-time code asked for: sent, challenged or refused.
    fn record_code(&mut self, visit: &Visit, answer: Answer, delay: u64) {
        let index = (visit.at.saturating_add(delay) / 1_000_000) as usize;
        if index >= self.seconds.len() {
            self.seconds.resize(index + 1, Second::default());
        }
        let second = &mut self.seconds[index];
        match (visit.caller.side, answer) {
            (Side::Attacker, answer) => {
                self.pumped_asked += 1;
                second.pumped_sent += u32::from(answer == Answer::Admitted);
            }
            (Side::Innocent, Answer::Admitted) => {
                self.real_codes_asked += 1;
                second.real_codes_sent += 1;
            }
            (Side::Innocent, Answer::Challenged) => {
                self.real_codes_asked += 1;
                self.real_codes_challenged += 1;
            }
            (Side::Innocent, Answer::Refused) => {
                self.real_codes_asked += 1;
                self.real_codes_refused += 1;
            }
        }
    }

    /// `visit`, let through, took `latency` µs from arrival to the end of its work (scenarios
    /// that model the service's work). It counts in the second it arrived.
    pub(crate) fn record_latency(&mut self, visit: &Visit, latency: u64) {
        if visit.caller.side != Side::Innocent {
            return;
        }
        self.innocent_latencies.push(latency);
        let index = (visit.at / 1_000_000) as usize;
        if index >= self.seconds.len() {
            self.seconds.resize(index + 1, Second::default());
        }
        let second = &mut self.seconds[index];
        second.innocent_served += 1;
        second.innocent_latency_micros = second.innocent_latency_micros.saturating_add(latency);
    }

    /// While the store was down, `visit` asked about `rules`, and was refused or not. A
    /// refusal is charged to the rule its `429` names (`refused_by`: one counting in the
    /// gateway's memory); otherwise to the rules that fail closed among them (they refuse every
    /// request while the store is down); otherwise to those that count locally (`local`,
    /// `open_within`) — a refusal that names no rule; never to an open one.
    pub(crate) fn record_outage(
        &mut self,
        visit: &Visit,
        rules: impl IntoIterator<Item = RuleId>,
        refused: bool,
        refused_by: Option<String>,
        failure_policies: &[(RuleId, OnStoreFailure)],
    ) {
        let mut asked: Vec<(RuleId, Option<OnStoreFailure>)> = Vec::new();
        for rule in rules {
            if asked.iter().all(|(seen, _)| *seen != rule) {
                let policy = failure_policies
                    .iter()
                    .find(|(id, _)| *id == rule)
                    .map(|(_, policy)| *policy);
                asked.push((rule, policy));
            }
        }
        let closed = Some(OnStoreFailure::Closed);
        let any_closed = asked.iter().any(|(_, policy)| *policy == closed);
        let named = refused_by.filter(|name| asked.iter().any(|(rule, _)| rule.as_str() == name));
        for (rule, on_failure) in asked {
            let refuser = match (&named, on_failure) {
                (Some(name), _) => rule.as_str() == name,
                (None, Some(OnStoreFailure::Closed)) => true,
                (None, Some(OnStoreFailure::Open)) => false,
                (None, _) => !any_closed,
            };
            let entry = self.outage.entry(rule.clone()).or_insert(RuleInOutage {
                rule,
                on_failure,
                attacker_requests: 0,
                innocent_requests: 0,
                attackers_let_through: 0,
                innocents_refused: 0,
            });
            match visit.caller.side {
                Side::Attacker => {
                    entry.attacker_requests += 1;
                    entry.attackers_let_through += u64::from(!refused);
                }
                Side::Innocent => {
                    entry.innocent_requests += 1;
                    entry.innocents_refused += u64::from(refused && refuser);
                }
            }
        }
    }

    pub(crate) fn finish(
        mut self,
        scenario: &crate::Scenario,
        policy: &crate::Policy,
        seed: u64,
    ) -> Outcome {
        self.innocent_latencies.sort_unstable();
        let percentile = |latencies: &[u64], percent: usize| {
            let last = latencies.len().checked_sub(1)?;
            latencies.get(last * percent / 100).copied()
        };
        let admitted: u64 = self.seconds.iter().map(|s| u64::from(s.admitted())).sum();
        // The loop's admissions a second, from its second second to its end.
        let loop_seconds = self.looping.as_ref().and_then(|looping| {
            let from = (looping.start / 1_000_000) as usize + 1;
            let to = ((looping.end / 1_000_000) as usize).min(self.seconds.len());
            let seconds = self
                .seconds
                .get(from..to)
                .filter(|seconds| !seconds.is_empty())?;
            let sum: u64 = seconds.iter().map(|s| u64::from(s.attacker_admitted)).sum();
            Some(sum as f64 / seconds.len() as f64)
        });
        let score = Score {
            requests: self.requests,
            attacker_requests: self.attacker_requests,
            attackers_let_through: self.attackers_let_through,
            accounts_created: self.accounts_created,
            sms_sent: self.sms_sent,
            pumped_asked: self.pumped_asked,
            real_codes_asked: self.real_codes_asked,
            real_codes_refused: self.real_codes_refused,
            real_codes_challenged: self.real_codes_challenged,
            innocents: self.innocents.len() as u64,
            innocents_blocked: self.blocked.len() as u64,
            innocent_requests_refused: self.innocent_requests_refused,
            delayed: self.delayed,
            delay_total_micros: self.delay_total_micros,
            admitted_peak_per_second: self
                .seconds
                .iter()
                .map(|s| u64::from(s.admitted()))
                .max()
                .unwrap_or(0),
            admitted_mean_per_second: admitted as f64 / self.duration_seconds.max(1) as f64,
            loop_stopped_after_micros: self
                .looping
                .zip(self.loop_first_refusal)
                .map(|(looping, refused)| refused.saturating_sub(looping.start)),
            loop_admitted_per_second: loop_seconds,
            innocent_latency_p50_micros: percentile(&self.innocent_latencies, 50),
            innocent_latency_p99_micros: percentile(&self.innocent_latencies, 99),
        };
        Outcome {
            scenario: scenario.name(),
            sms_price: scenario.sms_price(),
            policy: policy.name().to_owned(),
            kind: policy.kind(),
            seed,
            score,
            seconds: self.seconds,
            outage: self.outage.into_values().collect(),
        }
    }
}
