//! The tables: medians over rounds, each ratio taken within one round.

use crate::common::{median, range};
use crate::figures::Figures;

/// Target: tollgate keeps at least this share of `redis-benchmark`'s throughput.
const THROUGHPUT_TARGET: f64 = 0.80;

/// Target: p99 latency at half of tollgate's peak load, ms.
const P99_TARGET_MS: f64 = 1.0;

/// One round's pair of closed-loop runs at the same concurrency.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pair {
    pub(crate) tollgate: Figures,
    pub(crate) baseline: Figures,
}

/// Every round of one workload at one concurrency.
pub(crate) struct Series {
    pub(crate) workload: String,
    pub(crate) concurrency: usize,
    pub(crate) rounds: Vec<Pair>,
}

impl Series {
    /// tollgate's median throughput over the rounds.
    pub(crate) fn tollgate_rate(&self) -> f64 {
        median(self.rounds.iter().map(|pair| pair.tollgate.rate))
    }
}

/// Open-loop runs of one workload at one fraction of its peak; the baseline is the bare
/// `EVALSHA` on a plain redis-rs connection.
pub(crate) struct OpenLoad {
    pub(crate) workload: String,
    pub(crate) peak: f64,
    pub(crate) fraction: f64,
    pub(crate) rounds: Vec<Pair>,
}

/// Prints the closed-loop table: tollgate against `redis-benchmark`, concurrency by
/// concurrency.
pub(crate) fn closed_loop(series: &[Series], seconds: f64) {
    println!(
        "{:<12} {:>4} {:>11} {:>11} {:>6} {:>11} {:>7} {:>7} {:>7} {:>7}  verdict",
        "workload",
        "conc",
        "tollgate/s",
        "r-bench/s",
        "ratio",
        "range",
        "tg p50",
        "tg p99",
        "rb p50",
        "rb p99"
    );
    for series in series {
        let of = |pick: fn(&Pair) -> f64| median(series.rounds.iter().map(pick));
        let ratios = || {
            series
                .rounds
                .iter()
                .map(|pair| pair.tollgate.rate / pair.baseline.rate)
        };
        let ratio = median(ratios());
        let (low, high) = range(ratios());
        println!(
            "{:<12} {:>4} {:>11.0} {:>11.0} {:>6.2} {:>11} {:>7.3} {:>7.3} {:>7.3} {:>7.3}  {}",
            series.workload,
            series.concurrency,
            of(|pair| pair.tollgate.rate),
            of(|pair| pair.baseline.rate),
            ratio,
            format!("{low:.2}-{high:.2}"),
            of(|pair| pair.tollgate.p50_ms),
            of(|pair| pair.tollgate.p99_ms),
            of(|pair| pair.baseline.p50_ms),
            of(|pair| pair.baseline.p99_ms),
            verdict(ratio >= THROUGHPUT_TARGET),
        );
    }
    let rounds = series.first().map_or(0, |series| series.rounds.len());
    println!(
        "\n{rounds} round(s) of {seconds} s per run; ratio = tollgate / redis-benchmark checks per \
         second within a round, median over rounds (target >= {THROUGHPUT_TARGET:.2}); \
         latencies in ms, medians over rounds"
    );
}

/// Prints the open-loop table: latency at fractions of tollgate's peak throughput, next to the
/// bare `EVALSHA` at the same rate; the target applies up to half of the peak.
pub(crate) fn open_loop(runs: &[OpenLoad], seconds: f64) {
    println!(
        "{:<12} {:>5} {:>10} {:>10} {:>7} {:>7} {:>13} {:>8} {:>8}  verdict",
        "workload",
        "load",
        "offered/s",
        "achieved/s",
        "tg p50",
        "tg p99",
        "tg p99 range",
        "bare p50",
        "bare p99"
    );
    for run in runs {
        let of = |pick: fn(&Pair) -> f64| median(run.rounds.iter().map(pick));
        let p99 = of(|pair| pair.tollgate.p99_ms);
        let (low, high) = range(run.rounds.iter().map(|pair| pair.tollgate.p99_ms));
        let verdict = if run.fraction <= 0.5 {
            verdict(p99 <= P99_TARGET_MS)
        } else {
            "-"
        };
        println!(
            "{:<12} {:>4.0}% {:>10.0} {:>10.0} {:>7.3} {:>7.3} {:>13} {:>8.3} {:>8.3}  {verdict}",
            run.workload,
            run.fraction * 100.0,
            run.peak * run.fraction,
            of(|pair| pair.tollgate.rate),
            of(|pair| pair.tollgate.p50_ms),
            p99,
            format!("{low:.3}-{high:.3}"),
            of(|pair| pair.baseline.p50_ms),
            of(|pair| pair.baseline.p99_ms),
        );
    }
    let rounds = runs.first().map_or(0, |run| run.rounds.len());
    println!(
        "\n{rounds} round(s) of {seconds} s per row and client; load = share of the peak \
         (tollgate's best median closed-loop rate for the workload), checks evenly spaced; \
         bare = the same EVALSHA on a plain redis-rs connection at the same rate; latency from \
         each check's scheduled start, ms, medians over rounds (target: tollgate p99 <= \
         {P99_TARGET_MS:.1} ms at up to half of the peak)"
    );
}

fn verdict(met: bool) -> &'static str {
    if met { "meets target" } else { "MISSES target" }
}
