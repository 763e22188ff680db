//! What one timed run yields: checks per second and latency percentiles.

use std::time::Duration;

/// Throughput and latency of one timed run (of tollgate or of `redis-benchmark`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Figures {
    /// Checks (or requests) completed per second.
    pub(crate) rate: f64,
    /// Median latency, ms.
    pub(crate) p50_ms: f64,
    /// 99th percentile latency, ms.
    pub(crate) p99_ms: f64,
}

impl Figures {
    /// From every check's latency (ns, any order) and the run's wall-clock time.
    pub(crate) fn from_latencies(mut latencies: Vec<u64>, elapsed: Duration) -> Figures {
        latencies.sort_unstable();
        Figures {
            rate: latencies.len() as f64 / elapsed.as_secs_f64(),
            p50_ms: percentile_ms(&latencies, 0.50),
            p99_ms: percentile_ms(&latencies, 0.99),
        }
    }
}

/// The nearest-rank percentile of sorted nanoseconds, in ms (0 when there are none).
fn percentile_ms(sorted: &[u64], fraction: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (fraction * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1] as f64 / 1e6
}
