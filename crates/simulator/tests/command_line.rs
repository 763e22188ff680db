//! `tollgate-sim` as a team runs it: scoring its own rule file, and refusing a broken one with
//! every mistake at its line and column.

use std::process::Command;

fn tollgate_sim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tollgate-sim"))
}

#[test]
fn a_rule_file_with_mistakes_is_reported_at_its_lines_and_nothing_runs() {
    let directory = tempfile::tempdir().expect("a temporary directory");
    let rules = directory.path().join("ours.toml");
    std::fs::write(
        &rules,
        "[[rule]]\nid = \"reads\"\nalgorithm = \"token_bucket\"\ncapacity = 50\n\
         refill = { amount = 10, per = \"1s\" }\nkey = \"acount\"\n",
    )
    .expect("written");
    let output = tollgate_sim()
        .args(["--scenario", "crowd", "--scale", "0.01", "--quiet"])
        .arg(&rules)
        .output()
        .expect("tollgate-sim runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("ours.toml:6:8"),
        "the mistake at its line and column: {stderr}"
    );
    assert!(
        stderr.contains("account"),
        "the registered name suggested: {stderr}"
    );
    assert!(output.stdout.is_empty(), "nothing simulated");
}

#[test]
fn a_teams_own_rule_file_is_scored_beside_the_built_in_policies() {
    let directory = tempfile::tempdir().expect("a temporary directory");
    let rules = directory.path().join("generous.toml");
    std::fs::write(
        &rules,
        "[[rule]]\nid = \"per-ip\"\nalgorithm = \"fixed_window\"\nlimit = 100000\n\
         window = \"1m\"\nkey = \"peer_ip\"\n",
    )
    .expect("written");
    let csv = directory.path().join("results.csv");
    let charts = directory.path().join("charts");
    let output = tollgate_sim()
        .args([
            "--scenario",
            "crowd",
            "--scale",
            "0.05",
            "--crowd-users",
            "500",
            "--quiet",
        ])
        .arg("--csv")
        .arg(&csv)
        .arg("--charts")
        .arg(&charts)
        .arg(&rules)
        .output()
        .expect("tollgate-sim runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("users: 500"),
        "parameters printed: {stdout}"
    );
    let csv = std::fs::read_to_string(&csv).expect("the CSV is written");
    let policies: Vec<&str> = csv
        .lines()
        .skip(1)
        .map(|line| line.split(',').nth(1).unwrap_or_default())
        .collect();
    assert_eq!(policies[..3], ["none", "per-ip", "layered"]);
    assert!(policies[3].ends_with("generous.toml"), "{policies:?}");
    let svg = std::fs::read_to_string(charts.join("crowd.svg")).expect("the chart is written");
    assert!(svg.starts_with("<svg") && svg.contains("generous.toml"));
}

#[test]
fn lengths_and_rates_that_cannot_be_simulated_are_refused_before_anything_runs() {
    for bad in [
        ["--scale", "0"],
        ["--scale", "NaN"],
        ["--scale=-1", "--seed=1"],
        ["--scale", "1e12"],
        ["--loop-rate", "NaN"],
        ["--otp-rate", "inf"],
        ["--otp-hours", "0"],
        ["--otp-hours", "NaN"],
        ["--sms-price", "-1"],
        ["--otp-blocks", "0"],
        ["--otp-ranges", "0"],
        ["--otp-ranges", "1001"],
        ["--otp-hours", "1e-300"],
        ["--sms-price", "1e300"],
        ["--loop-rate", "2000000"],
        ["--wave-blocks", "0"],
        ["--crowd-addresses", "300"],
    ] {
        let output = tollgate_sim()
            .args(bad)
            .arg("--quiet")
            .output()
            .expect("tollgate-sim runs");
        assert_eq!(output.status.code(), Some(2), "{bad:?}");
        assert!(output.stdout.is_empty(), "{bad:?}: nothing simulated");
        let stderr = String::from_utf8_lossy(&output.stderr);
        let option = bad[0].split('=').next().unwrap_or_default();
        assert!(
            stderr.contains(option),
            "{bad:?}: the option named: {stderr}"
        );
    }
    let output = tollgate_sim()
        .args(["--wave-addresses", "600", "--wave-blocks", "2", "--quiet"])
        .output()
        .expect("tollgate-sim runs");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("at most 508"));
    for (bad, said) in [
        (
            ["--otp-numbers", "30001", "--otp-ranges", "3"],
            "10,000 a range",
        ),
        (["--otp-addresses", "600", "--otp-blocks", "2"], "1 to 508"),
        (["--otp-numbers", "2", "--otp-ranges", "3"], "at least one"),
        (
            ["--otp-addresses", "5", "--otp-blocks", "10"],
            "at most one an address",
        ),
        (
            ["--scenario", "outage", "--otp-hours", "0.1"],
            "past the end",
        ),
        (["--otp-hours", "1000", "--scale", "10"], "1,000 hours"),
    ] {
        let output = tollgate_sim()
            .args(bad)
            .arg("--quiet")
            .output()
            .expect("tollgate-sim runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{bad:?}: {stderr}");
        assert!(output.stdout.is_empty(), "{bad:?}: nothing simulated");
        assert!(
            stderr.contains("--otp-") && stderr.contains(said),
            "{bad:?}: {stderr}"
        );
    }
}

#[test]
fn every_attacker_parameter_of_code_fraud_is_a_flag_and_the_report_bills_the_codes() {
    let directory = tempfile::tempdir().expect("a temporary directory");
    let csv = directory.path().join("codes.csv");
    let charts = directory.path().join("charts");
    let output = tollgate_sim()
        .args([
            "--scenario",
            "otp",
            "--otp-rate",
            "20",
            "--otp-addresses",
            "300",
            "--otp-blocks",
            "3",
            "--otp-numbers",
            "500",
            "--otp-ranges",
            "7",
            "--otp-signs-up",
            "4",
            "--otp-hours",
            "0.1",
            "--sms-price",
            "0.25",
            "--quiet",
        ])
        .arg("--csv")
        .arg(&csv)
        .arg("--charts")
        .arg(&charts)
        .output()
        .expect("tollgate-sim runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for said in [
        "attack: codes a second: 20",
        "attack: hours: 0.1",
        "300 in 3 /24 blocks",
        "500 in 7 ranges",
        "one account per 4 codes",
        "SMS price: $0.25",
        "one-time codes:",
        "pumped bill",
    ] {
        assert!(stdout.contains(said), "{said:?} in {stdout}");
    }
    // With no limits, every pumped code is sent and billed at the price given.
    let csv = std::fs::read_to_string(&csv).expect("the CSV is written");
    let header: Vec<&str> = csv.lines().next().expect("a header").split(',').collect();
    let column = |name: &str| header.iter().position(|c| *c == name).expect(name);
    let none: Vec<&str> = csv.lines().nth(1).expect("a row").split(',').collect();
    assert_eq!(none[1], "none");
    let sent: f64 = none[column("sms_sent")].parse().expect("a count");
    let bill: f64 = none[column("pumped_bill")].parse().expect("a bill");
    assert!(sent > 0.0);
    assert!((bill - sent * 0.25).abs() < 0.01, "{sent} codes, ${bill}");
    let svg = std::fs::read_to_string(charts.join("otp.svg")).expect("the chart is written");
    assert!(svg.contains("pumped codes sent a minute") && svg.contains("layered"));
}
