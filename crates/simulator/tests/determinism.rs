//! The same seed gives the same results, byte for byte; another seed gives other traffic.

use tollgate_simulator::{
    Crowd, OtpAttack, OtpFraud, OutageAndFraud, Policy, Scenario, Wave, report, simulate,
};

fn csv(seed: u64) -> String {
    let scenarios = [
        Scenario::Wave(Wave {
            attempts: 400,
            hours: 0.5,
            ..Wave::default()
        }),
        Scenario::Crowd(Crowd {
            users: 300,
            minutes: 3.0,
            ..Crowd::default()
        }),
        Scenario::Outage(OutageAndFraud {
            attack: OtpAttack {
                hours: 2.0 / 60.0,
                ..OtpAttack::default()
            },
            outage_from_minute: 0.5,
            outage_minutes: 1.0,
            users: 100,
            ..OutageAndFraud::default()
        }),
        Scenario::Otp(OtpFraud {
            attack: OtpAttack {
                hours: 0.05,
                signs_up: 3,
                ..OtpAttack::default()
            },
            ..OtpFraud::default()
        }),
    ];
    let policies = [
        Policy::none().expect("no limits"),
        Policy::per_ip(100).expect("per-IP"),
        Policy::layered().expect("layered"),
    ];
    let mut outcomes = Vec::new();
    for scenario in &scenarios {
        for policy in &policies {
            outcomes.push(simulate(scenario, policy, seed, &mut |_| {}).expect("it runs"));
        }
    }
    let mut out = Vec::new();
    report::write_csv(&mut out, &outcomes).expect("written to memory");
    String::from_utf8(out).expect("UTF-8")
}

#[test]
fn two_runs_with_one_seed_write_identical_csv_and_another_seed_differs() {
    let first = csv(11);
    assert_eq!(
        first.lines().count(),
        13,
        "a header and twelve rows:\n{first}"
    );
    assert_eq!(first, csv(11));
    assert_ne!(first, csv(12));
}
