//! The score counts what the policy did, whatever the rule file says: a refusal with a rule's
//! own status, an outage refusal charged to the rule that refused, a loop too short to measure.

use tollgate_simulator::{Error, OutageAndFraud, PartnerLoop, Policy, Scenario, Wave, simulate};

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
        minutes: 2.0,
        outage_from_minute: 0.5,
        outage_minutes: 1.0,
        users: 50,
        real_codes_per_hour: 3_600.0,
        ..OutageAndFraud::default()
    });
    let outcome = simulate(&scenario, &mixed, 9, &mut |_| {}).expect("it runs");
    let rule = |id: &str| {
        outcome
            .outage
            .iter()
            .find(|rule| rule.rule.as_str() == id)
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
