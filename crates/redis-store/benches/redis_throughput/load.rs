//! Load generators: closed loop (a fixed number of tasks, each checking as fast as it can) and
//! open loop (checks started at a fixed rate, whether or not earlier ones have answered).

use std::future::Future;
use std::time::{Duration, Instant};

use tokio::runtime::Handle;

use crate::figures::Figures;

/// One check of a workload, through tollgate or around it.
pub(crate) trait Checker: Clone + Send + Sync + 'static {
    /// Checks the key the random number `pick` selects; panics on an error or a refusal.
    fn check(&self, pick: u64) -> impl Future<Output = ()> + Send + 'static;
}

/// `concurrency` tasks, each checking in a loop for `duration`; every check's latency runs
/// from the call to its answer.
pub(crate) async fn closed_loop(
    checker: &impl Checker,
    concurrency: usize,
    duration: Duration,
) -> Figures {
    let start = Instant::now();
    let deadline = start + duration;
    let tasks: Vec<_> = (0..concurrency)
        .map(|task| {
            let checker = checker.clone();
            tokio::spawn(async move {
                let mut random = Random::new(task as u64);
                let mut latencies = Vec::new();
                while Instant::now() < deadline {
                    let sent = Instant::now();
                    checker.check(random.pick()).await;
                    latencies.push(nanos_since(sent));
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.expect("a check task does not panic"));
    }
    Figures::from_latencies(latencies, start.elapsed())
}

/// Starts `rate` checks a second for `duration` on `runtime`, each at its own scheduled
/// instant (evenly spaced), whether or not earlier ones have answered. This thread schedules
/// them: it sleeps until the next one is due (a sleep overshoots by some 50-100 µs, so checks
/// leave in small bunches) and spawns every check that is due. Latency runs from a check's
/// **scheduled** instant to its answer, so time it spent waiting for this thread or a busy
/// runtime counts too. The figures' rate is the rate achieved.
pub(crate) fn open_loop(
    runtime: &Handle,
    checker: &impl Checker,
    rate: f64,
    duration: Duration,
) -> Figures {
    let (sender, receiver) = std::sync::mpsc::channel();
    let checks = (rate * duration.as_secs_f64()).round() as u64;
    let mut random = Random::new(u64::MAX);
    let start = Instant::now();
    for at in 0..checks {
        let scheduled = start + Duration::from_secs_f64(at as f64 / rate);
        let now = Instant::now();
        if scheduled > now {
            std::thread::sleep(scheduled - now);
        }
        let (check, sender) = (checker.check(random.pick()), sender.clone());
        runtime.spawn(async move {
            check.await;
            // The receiver outlives every sender.
            let _ = sender.send(nanos_since(scheduled));
        });
    }
    let generating = start.elapsed().max(duration);
    drop(sender);
    // Ends when every check has answered (or panicked, dropping its sender).
    let latencies: Vec<u64> = receiver.iter().collect();
    assert_eq!(
        latencies.len() as u64,
        checks,
        "every open-loop check answered"
    );
    Figures::from_latencies(latencies, generating)
}

fn nanos_since(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// xorshift64*: a few cycles per key pick, and no dependency.
struct Random(u64);

impl Random {
    fn new(seed: u64) -> Random {
        // Any non-zero state works; spread small seeds apart.
        Random(seed.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn pick(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}
