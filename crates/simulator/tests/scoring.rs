//! The score counts what the policy did, whatever the rule file says: a refusal with a rule's
//! own status, an outage refusal charged to the rule that refused, shadow, local and
//! open-within rules in an outage, pacing delays, a loop too short to measure.

use tollgate::OnStoreFailure;
use tollgate_simulator::{
    Crowd, Error, OtpAttack, OutageAndFraud, Outcome, PartnerLoop, Policy, RealCodes, Scenario,
    Wave, simulate, story_notes,
};

fn policy(text: &str) -> Policy {
    let directory = tempfile::tempdir().expect("a temporary directory");
    let path = directory.path().join("policy.toml");
    std::fs::write(&path, text).expect("written");
    Policy::from_file(&path).expect("the policy loads")
}

#[test]
fn a_missing_key_refused_with_the_rules_own_status_counts_as_a_refusal() {
    let refuse_without_device = policy(
        "[[rule]]\nid = \"signups-per-device\"\nmatch = { method = \"POST\", path = \"/signup\" }\n\
         algorithm = \"fixed_window\"\nlimit = 3\nwindow = \"1d\"\nkey = { header = \"x-device-id\" }\n\
         on_missing_key = { refuse = 401 }\n",
    );
    let wave = Scenario::Wave(Wave {
        attempts: 200,
        hours: 0.25,
        devices: 0,
        ..Wave::default()
    });
    let score = simulate(&wave, &refuse_without_device, 5, &mut |_| {})
        .expect("it runs")
        .score;
    assert!(score.attacker_requests > 150, "{score:?}");
    assert_eq!(
        score.attackers_let_through, 0,
        "every device-less sign-up is refused"
    );
    assert_eq!(score.accounts_created, 0);
}

#[test]
fn a_rule_named_like_one_of_chirps_typed_limits_without_its_limit_is_refused_as_the_gateway_would()
{
    let directory = tempfile::tempdir().expect("a temporary directory");
    let path = directory.path().join("clash.toml");
    std::fs::write(
        &path,
        "[[rule]]\nid = \"sms-per-phone\"\nmatch = { method = \"POST\", path = \"/otp\" }\n\
         algorithm = \"fixed_window\"\nlimit = 5\nwindow = \"1h\"\nkey = \"global\"\n",
    )
    .expect("written");
    match Policy::from_file(&path) {
        Err(Error::Chirp(problem)) => {
            assert!(
                problem.contains("sms-per-phone") && problem.contains("[[limit]]"),
                "{problem}"
            )
        }
        other => panic!("expected the gateway's refusal, got {other:?}"),
    }
}

#[test]
fn during_an_outage_a_refusal_is_charged_to_the_rule_that_fails_closed_not_to_an_open_one() {
    let mixed = policy(
        "[[rule]]\nid = \"per-ip\"\nalgorithm = \"fixed_window\"\nlimit = 100000\nwindow = \"1m\"\n\
         key = \"peer_ip\"\n\n[[rule]]\nid = \"codes-closed\"\nmatch = { method = \"POST\", path = \"/otp\" }\n\
         algorithm = \"fixed_window\"\nlimit = 100000\nwindow = \"1s\"\nkey = \"global\"\n\
         on_store_failure = \"closed\"\n",
    );
    let scenario = Scenario::Outage(OutageAndFraud {
        attack: OtpAttack {
            hours: 2.0 / 60.0,
            ..OtpAttack::default()
        },
        outage_from_minute: 0.5,
        outage_minutes: 1.0,
        users: 50,
        codes: RealCodes {
            per_hour: 3_600.0,
            ..RealCodes::default()
        },
        ..OutageAndFraud::default()
    });
    let outcome = simulate(&scenario, &mixed, 9, &mut |_| {}).expect("it runs");
    let rule = |id: &str| {
        outcome
            .outage_of(id)
            .unwrap_or_else(|| panic!("{id} in {:?}", outcome.outage))
            .clone()
    };
    let (open, closed) = (rule("per-ip"), rule("codes-closed"));
    assert!(closed.innocents_refused > 0, "{closed:?}");
    assert_eq!(closed.attackers_let_through, 0, "{closed:?}");
    assert_eq!(
        open.innocents_refused, 0,
        "failing open refuses no one: {open:?}"
    );
}

#[test]
fn a_loop_too_short_to_measure_a_whole_second_reports_no_rate_and_no_loop_reports_none() {
    let short = Scenario::Partner(PartnerLoop {
        loop_minutes: 1.5 / 60.0,
        quiet_minutes: 0.1,
        loop_per_second: 1_000.0,
        users: 5,
        ..PartnerLoop::default()
    });
    let unlimited = Policy::none().expect("no limits");
    let score = simulate(&short, &unlimited, 3, &mut |_| {})
        .expect("it runs")
        .score;
    assert!(score.attackers_let_through > 1_000, "{score:?}");
    assert_eq!(score.loop_admitted_per_second, None);
    let layered =
        simulate(&short, &Policy::layered().expect("layered"), 3, &mut |_| {}).expect("it runs");
    let notes = story_notes(&short, &layered);
    assert!(notes[0].contains("too short a loop"), "{notes:?}");

    let none = Scenario::Partner(PartnerLoop {
        loop_per_second: 0.0,
        quiet_minutes: 0.1,
        loop_minutes: 0.1,
        users: 5,
        ..PartnerLoop::default()
    });
    assert_eq!(none.looping(), None);
    let score = simulate(&none, &unlimited, 3, &mut |_| {})
        .expect("it runs")
        .score;
    assert_eq!(score.attacker_requests, 0);
    assert_eq!(score.loop_admitted_per_second, None);
}

/// A short outage scenario (store down from minute 0.5 to 1.5) scored against `text`.
fn outage_with(text: &str) -> Outcome {
    let scenario = Scenario::Outage(OutageAndFraud {
        attack: OtpAttack {
            hours: 2.0 / 60.0,
            ..OtpAttack::default()
        },
        outage_from_minute: 0.5,
        outage_minutes: 1.0,
        users: 30,
        codes: RealCodes {
            per_hour: 3_600.0,
            ..RealCodes::default()
        },
        ..OutageAndFraud::default()
    });
    simulate(&scenario, &policy(text), 4, &mut |_| {}).expect("it runs")
}

const CODES_RULE: &str = "[[rule]]\nid = \"codes\"\nmatch = { method = \"POST\", path = \"/otp\" }\n\
    algorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1h\"\nkey = \"peer_ip\"\n";

#[test]
fn a_shadow_rule_that_says_closed_refuses_no_one_in_an_outage_and_is_shown_open() {
    let outcome = outage_with(&format!(
        "{CODES_RULE}mode = \"shadow\"\non_store_failure = \"closed\"\n"
    ));
    let codes = outcome.outage_of("codes").expect("asked");
    assert_eq!(codes.on_failure, Some(OnStoreFailure::Open));
    assert_eq!(codes.innocents_refused, 0);
    assert_eq!(codes.attackers_let_through, codes.attacker_requests);
    assert_eq!(outcome.score.innocents_blocked, 0);
}

#[test]
fn local_and_open_within_rules_count_in_the_gateways_memory_while_the_store_is_down() {
    let open = outage_with(&format!("{CODES_RULE}on_store_failure = \"open\"\n"));
    let local = outage_with(&format!("{CODES_RULE}on_store_failure = \"local\"\n"));
    let within = outage_with(&format!(
        "{CODES_RULE}on_store_failure = {{ open_within = {{ algorithm = \"fixed_window\", limit = 1, window = \"1h\" }} }}\n"
    ));
    let during = |outcome: &Outcome| outcome.outage[0].attackers_let_through;
    let asked = open.outage[0].attacker_requests;
    assert_eq!(during(&open), asked, "open lets every attack in");
    // One code per fraud address per hour from the gateway's memory (50 addresses), not all.
    assert!(
        during(&local) <= 50 && during(&local) > 0,
        "local: {:?}",
        local.outage
    );
    assert!(
        during(&within) <= 50 && during(&within) > 0,
        "open_within: {:?}",
        within.outage
    );
    assert!(asked > 300, "{asked}");
}

#[test]
fn an_outage_refusal_is_charged_to_the_closed_rule_even_beside_a_local_one_and_escalation_is_its_rule()
 {
    let outcome = outage_with(
        "[[rule]]\nid = \"per-ip\"\nalgorithm = \"fixed_window\"\nlimit = 100000\nwindow = \"1m\"\n\
         key = \"peer_ip\"\non_store_failure = \"local\"\n\
         escalate = { after_refusals = 5, within = \"1m\", block_for = \"1h\" }\n\n\
         [[rule]]\nid = \"codes-closed\"\nmatch = { method = \"POST\", path = \"/otp\" }\n\
         algorithm = \"fixed_window\"\nlimit = 100000\nwindow = \"1s\"\nkey = \"global\"\n\
         on_store_failure = \"closed\"\n",
    );
    let ids: Vec<&str> = outcome
        .outage
        .iter()
        .map(|rule| rule.rule.as_str())
        .collect();
    assert_eq!(
        ids,
        ["codes-closed", "per-ip"],
        "an escalation's ids are its rule's"
    );
    let local = &outcome.outage[1];
    assert_eq!(local.on_failure, Some(OnStoreFailure::Local));
    assert_eq!(local.innocents_refused, 0, "{local:?}");
    assert!(
        outcome.outage[0].innocents_refused > 0,
        "{:?}",
        outcome.outage[0]
    );
}

#[test]
fn a_pacing_rule_is_scored_when_its_requests_go_through_and_its_delays_are_counted() {
    let crowd = Scenario::Crowd(Crowd {
        users: 1_000,
        minutes: 2.0,
        ..Crowd::default()
    });
    let paced = policy(
        "[[rule]]\nid = \"paced\"\nalgorithm = \"pacing\"\nrate = { amount = 1, per = \"1s\" }\n\
         max_delay = \"1h\"\nkey = \"peer_ip\"\n",
    );
    let score = simulate(&crowd, &paced, 6, &mut |_| {})
        .expect("it runs")
        .score;
    assert!(score.delayed > 0, "{score:?}");
    assert!(score.mean_delay_seconds().is_some_and(|mean| mean > 0.0));
    assert!(
        score.admitted_peak_per_second <= 8,
        "one a second for each of the 8 NAT addresses: {score:?}"
    );
}

#[test]
fn a_limit_no_chirp_handler_checks_is_refused_as_a_typo() {
    let directory = tempfile::tempdir().expect("a temporary directory");
    let path = directory.path().join("typo.toml");
    std::fs::write(
        &path,
        "[[limit]]\nid = \"sms-per-phon\"\nalgorithm = \"fixed_window\"\nlimit = 3\nwindow = \"1h\"\n",
    )
    .expect("written");
    match Policy::from_file(&path) {
        Err(Error::Chirp(problem)) => assert!(problem.contains("sms-per-phon"), "{problem}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn an_outage_refusal_by_a_local_rule_is_charged_to_the_rule_its_answer_names() {
    let outcome = outage_with(
        "[[rule]]\nid = \"wide\"\nmatch = { method = \"POST\", path = \"/otp\" }\n\
         algorithm = \"fixed_window\"\nlimit = 1000000\nwindow = \"1h\"\nkey = \"peer_ip\"\n\
         on_store_failure = \"local\"\n\n\
         [[rule]]\nid = \"tight\"\nmatch = { method = \"POST\", path = \"/otp\" }\n\
         algorithm = \"fixed_window\"\nlimit = 1\nwindow = \"1h\"\nkey = \"global\"\n\
         on_store_failure = \"local\"\n",
    );
    let rule = |id: &str| {
        outcome
            .outage_of(id)
            .unwrap_or_else(|| panic!("{id} in {:?}", outcome.outage))
            .clone()
    };
    assert_eq!(rule("wide").innocents_refused, 0, "{:?}", outcome.outage);
    assert!(rule("tight").innocents_refused > 0, "{:?}", outcome.outage);
}
