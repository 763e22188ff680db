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
        ["--fraud-rate", "inf"],
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
}
