//! The baseline: `redis-benchmark` sending the same `EVALSHA` over `concurrency` connections.

use std::process::Command;

use crate::figures::Figures;

const PROGRAM: &str = "redis-benchmark";

/// Whether `redis-benchmark` runs at all (it comes with `redis-tools` on Debian).
pub(crate) fn is_installed() -> bool {
    Command::new(PROGRAM)
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success())
}

/// Runs `redis-benchmark -c concurrency -n requests --csv -e ARGS` against `127.0.0.1:port` and
/// reads its throughput and latency percentiles.
///
/// # Panics
///
/// If `redis-benchmark` fails, reports a server error (its requests would not be the checks
/// they stand for), or prints no figures.
pub(crate) fn run(port: u16, concurrency: usize, requests: u64, args: &[String]) -> Figures {
    let output = Command::new(PROGRAM)
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(["-c", &concurrency.to_string(), "-n", &requests.to_string()])
        // `-e` prints error replies, which would otherwise pass as requests.
        .args(["--csv", "-e"])
        .args(args)
        .output()
        .unwrap_or_else(|error| panic!("could not run {PROGRAM}: {error}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && !stdout.contains("Error from server"),
        "{PROGRAM} failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    stdout
        .lines()
        .find_map(parse_csv_row)
        .unwrap_or_else(|| panic!("no figures in {PROGRAM}'s output:\n{stdout}\n{stderr}"))
}

/// One result row of `redis-benchmark --csv` (Redis 7):
/// `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms",
/// "p99_latency_ms","max_latency_ms"`. The test's name is the command, so the numbers are read
/// from the end of the row.
fn parse_csv_row(line: &str) -> Option<Figures> {
    let fields: Vec<&str> = line
        .split(',')
        .map(|field| field.trim_matches('"'))
        .collect();
    let from_end = |back: usize| fields.get(fields.len().checked_sub(back)?)?.parse().ok();
    if fields.len() < 8 {
        return None;
    }
    Some(Figures {
        rate: from_end(7)?,
        p50_ms: from_end(4)?,
        p99_ms: from_end(2)?,
    })
}
