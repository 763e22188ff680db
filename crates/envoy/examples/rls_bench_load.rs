//! The load side of `scripts/bench-envoy`: a tonic client of Envoy's `ShouldRateLimit`, closed
//! loop (the server's peak) or open loop (a fixed rate), reporting calls, errors, latency
//! percentiles and the server's CPU time over the measured part of the run.
//!
//! ```text
//! rls_bench_load --address 127.0.0.1:PORT --server-pid PID --descriptors 1|3
//!                (--peak [--concurrency N] | --rate CALLS_PER_SECOND | --calls N)
//!                [--seconds S] [--warmup W] [--connections C] [--clock-ticks HZ]
//! ```
//!
//! * `--peak`: N tasks (default 64) on C HTTP/2 connections (default 4), each calling as soon
//!   as its last call answered; latency runs from a call to its answer.
//! * `--rate R`: calls started at R a second at evenly spaced scheduled instants whether or
//!   not earlier calls have answered (open loop; as many in flight as it takes), spread over
//!   the C connections. A task schedules them, spinning between calls on this thread's runtime
//!   (each turn also polls the sockets and runs the calls' tasks), so a call leaves within
//!   microseconds of its instant and this process always shows a whole CPU busy. Latency runs
//!   from a call's **scheduled** instant to its answer, so time spent waiting for the
//!   scheduler or a busy client counts too (no coordinated omission); `lag_*` says how late
//!   the scheduler itself was.
//!
//! * `--calls N`: exactly N calls, `--concurrency` at a time, no warm-up, then stop: a fixed
//!   amount of work for a profiler that counts instructions (`valgrind --tool=callgrind` on
//!   the server, counters zeroed and dumped around this run with `callgrind_control`).
//!
//! The generator is one thread (a current-thread tokio runtime: `taskset` pins it to a CPU of
//! its own) and a tonic client on a bare HTTP/2 connection (hyper's, with `TCP_NODELAY`),
//! without `Channel`'s buffer task, so that it costs less a call than the server it loads.
//!
//! Both modes run W seconds of warm-up (default 1) at the same load, then S measured seconds
//! (default 3); only calls started in the measured part count. The server's CPU time (user +
//! system, `/proc/PID/stat`, in units of `--clock-ticks`, default 100 = Linux's USER_HZ) is
//! read as the measured part starts and ends. Prints one JSON object: `calls`, `errors` (a
//! failed call or an answer other than OK; the first few are told on stderr), `seconds`,
//! `calls_per_second`, `server_cpu_seconds`, `calls_per_cpu_second`, `server_busy` and
//! `load_busy` (the server's and this generator's CPU seconds per second: at peak, the one
//! near 1.0 is what limits it; in open loop this generator spins, so its own is 1.0),
//! `steal_ms` (the time the hypervisor kept this machine's CPUs from running, `/proc/stat`: a
//! noisy neighbour shows there), `p50_us`, `p99_us`, `p999_us`, `max_us`, `lag_p99_us`,
//! `lag_max_us`.
//!
//! The requests are those `rls_bench_server`'s rules count, in the domain `bench`: one
//! descriptor `remote_address` (1,024 addresses in turn), or that and `path` + `user` (1,024
//! users) and the global `generic_key = api`.

#![allow(clippy::print_stdout)] // A bench reports what it measured.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tollgate_envoy::envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use tollgate_envoy::envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use tollgate_envoy::envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use tollgate_envoy::envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use tollgate_envoy::envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;

/// How many different callers the requests name, in turn.
const CALLERS: usize = 1_024;
/// Errors told on stderr, at most.
const ERRORS_TOLD: u64 = 5;

/// One HTTP/2 connection as the service a tonic client calls through.
#[derive(Clone)]
struct Connection(SendRequest<tonic::body::Body>);

type Answer = http::Response<hyper::body::Incoming>;

impl tower_service::Service<http::Request<tonic::body::Body>> for Connection {
    type Response = Answer;
    type Error = hyper::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Answer, hyper::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), hyper::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        Box::pin(self.0.send_request(request))
    }
}

type Client = RateLimitServiceClient<Connection>;

/// A tonic client on a connection of its own to `address`.
async fn connect(address: &str) -> Result<Client, Box<dyn std::error::Error>> {
    let stream = tokio::net::TcpStream::connect(address).await?;
    stream.set_nodelay(true)?;
    let (sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let origin = format!("http://{address}").parse()?;
    Ok(RateLimitServiceClient::with_origin(
        Connection(sender),
        origin,
    ))
}

struct Args {
    address: String,
    server_pid: u32,
    descriptors: usize,
    rate: Option<f64>,
    calls: Option<u64>,
    concurrency: usize,
    seconds: f64,
    warmup: f64,
    connections: usize,
    clock_ticks: f64,
}

fn args() -> Result<Args, String> {
    let mut parsed = Args {
        address: String::new(),
        server_pid: 0,
        descriptors: 1,
        rate: None,
        calls: None,
        concurrency: 64,
        seconds: 3.0,
        warmup: 1.0,
        connections: 4,
        clock_ticks: 100.0,
    };
    let mut peak = false;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--peak" {
            peak = true;
            continue;
        }
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        let number = |what: &str| -> Result<f64, String> {
            value
                .parse::<f64>()
                .map_err(|error| format!("{what}: {error}"))
        };
        match flag.as_str() {
            "--address" => parsed.address = value.clone(),
            "--server-pid" => parsed.server_pid = number("--server-pid")? as u32,
            "--descriptors" => parsed.descriptors = number("--descriptors")? as usize,
            "--rate" => parsed.rate = Some(number("--rate")?),
            "--calls" => parsed.calls = Some(number("--calls")? as u64),
            "--concurrency" => parsed.concurrency = number("--concurrency")? as usize,
            "--seconds" => parsed.seconds = number("--seconds")?,
            "--warmup" => parsed.warmup = number("--warmup")?,
            "--connections" => parsed.connections = number("--connections")? as usize,
            "--clock-ticks" => parsed.clock_ticks = number("--clock-ticks")?,
            _ => return Err(format!("unknown argument {flag:?}")),
        }
    }
    if parsed.address.is_empty() || parsed.server_pid == 0 {
        return Err("--address and --server-pid are needed".into());
    }
    if [peak, parsed.rate.is_some(), parsed.calls.is_some()]
        .iter()
        .filter(|&&mode| mode)
        .count()
        != 1
    {
        return Err("one of --peak, --rate R or --calls N".into());
    }
    if ![1, 3].contains(&parsed.descriptors) {
        return Err("--descriptors 1 or 3".into());
    }
    parsed.connections = parsed.connections.max(1);
    Ok(parsed)
}

/// The `CALLERS` requests of `descriptors` descriptors, used in turn.
fn requests(descriptors: usize) -> Arc<Vec<RateLimitRequest>> {
    let descriptor = |entries: &[(&str, String)]| RateLimitDescriptor {
        entries: entries
            .iter()
            .map(|(key, value)| Entry {
                key: (*key).to_owned(),
                value: value.clone(),
            })
            .collect(),
        ..RateLimitDescriptor::default()
    };
    let request = |caller: usize| {
        let address = format!("10.0.{}.{}", caller / 256, caller % 256);
        let mut list = vec![descriptor(&[("remote_address", address)])];
        if descriptors == 3 {
            list.push(descriptor(&[
                ("path", "/api/v1/items".to_owned()),
                ("user", format!("user-{caller}")),
            ]));
            list.push(descriptor(&[("generic_key", "api".to_owned())]));
        }
        RateLimitRequest {
            domain: "bench".to_owned(),
            descriptors: list,
            hits_addend: 0,
        }
    };
    Arc::new((0..CALLERS).map(request).collect())
}

/// A process's CPU time so far, user + system, in seconds.
fn cpu_seconds(pid: u32, clock_ticks: f64) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .unwrap_or_else(|error| panic!("/proc/{pid}/stat: {error}"));
    // The command name may hold spaces: the fields counted from after its ')'.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |at: usize| fields.get(at).and_then(|f| f.parse::<f64>().ok());
    // utime and stime are the 14th and 15th fields, the 12th and 13th after the name.
    let (user, system) = (ticks(11), ticks(12));
    (user.expect("utime") + system.expect("stime")) / clock_ticks
}

/// The time this machine's CPUs were runnable but not run by the hypervisor (`steal` in
/// `/proc/stat`, all CPUs), in seconds: 0 on bare metal.
fn steal_seconds(clock_ticks: f64) -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let cpu = stat.lines().next().unwrap_or_default();
    // cpu user nice system idle iowait irq softirq steal ...
    let steal = cpu
        .split_whitespace()
        .nth(8)
        .and_then(|f| f.parse::<f64>().ok());
    steal.unwrap_or(0.0) / clock_ticks
}

/// The server's and this process's CPU time so far, and the machine's steal time.
fn cpu_now(args: &Args) -> (f64, f64, f64) {
    (
        cpu_seconds(args.server_pid, args.clock_ticks),
        cpu_seconds(std::process::id(), args.clock_ticks),
        steal_seconds(args.clock_ticks),
    )
}

/// One call: `Ok(())` when answered OK; the first errors are told on stderr.
async fn call(client: &mut Client, request: RateLimitRequest) -> Result<(), ()> {
    static TOLD: AtomicU64 = AtomicU64::new(0);
    let error = match client.should_rate_limit(request).await {
        Ok(response) if response.get_ref().overall_code == Code::Ok as i32 => return Ok(()),
        Ok(response) => format!("answered code {}", response.get_ref().overall_code),
        Err(status) => format!("failed: {status}"),
    };
    if TOLD.fetch_add(1, Ordering::Relaxed) < ERRORS_TOLD {
        eprintln!("rls_bench_load: a call {error}");
    }
    Err(())
}

/// What the measured part of a run gave.
struct Measured {
    calls: u64,
    errors: u64,
    seconds: f64,
    server_cpu: f64,
    /// This generator's own CPU time over the same part.
    own_cpu: f64,
    /// The machine's steal time over the same part.
    steal: f64,
    latencies: Vec<u64>,
    lags: Vec<u64>,
}

fn nanos_since(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Closed loop: `concurrency` tasks calling back to back.
async fn peak(args: &Args, clients: &[Client]) -> Measured {
    let requests = requests(args.descriptors);
    let measuring = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let (calls, errors) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let tasks: Vec<_> = (0..args.concurrency)
        .map(|task| {
            let mut client = clients[task % clients.len()].clone();
            let (requests, measuring, stop) = (requests.clone(), measuring.clone(), stop.clone());
            let (calls, errors) = (calls.clone(), errors.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut at = task * 17;
                while !stop.load(Ordering::Relaxed) {
                    let request = requests[at % CALLERS].clone();
                    at += 1;
                    let sent = Instant::now();
                    let answered = call(&mut client, request).await;
                    if measuring.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
                        latencies.push(nanos_since(sent));
                        calls.fetch_add(1, Ordering::Relaxed);
                        if answered.is_err() {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                latencies
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs_f64(args.warmup)).await;
    let before = cpu_now(args);
    let started = Instant::now();
    measuring.store(true, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs_f64(args.seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let seconds = started.elapsed().as_secs_f64();
    let after = cpu_now(args);
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.expect("a call task does not panic"));
    }
    Measured {
        calls: calls.load(Ordering::Relaxed),
        errors: errors.load(Ordering::Relaxed),
        seconds,
        server_cpu: after.0 - before.0,
        own_cpu: after.1 - before.1,
        steal: after.2 - before.2,
        latencies,
        lags: Vec::new(),
    }
}

/// Exactly `total` calls, `concurrency` at a time, measured whole (no warm-up): for a profiler
/// that counts a fixed amount of work (`valgrind --tool=callgrind` on the server).
async fn fixed(args: &Args, clients: &[Client], total: u64) -> Measured {
    let requests = requests(args.descriptors);
    let (tickets, errors) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let before = cpu_now(args);
    let started = Instant::now();
    let tasks: Vec<_> = (0..args.concurrency)
        .map(|task| {
            let mut client = clients[task % clients.len()].clone();
            let (requests, tickets, errors) = (requests.clone(), tickets.clone(), errors.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                loop {
                    let at = tickets.fetch_add(1, Ordering::Relaxed);
                    if at >= total {
                        return latencies;
                    }
                    let sent = Instant::now();
                    let request = requests[at as usize % CALLERS].clone();
                    if call(&mut client, request).await.is_err() {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                    latencies.push(nanos_since(sent));
                }
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.expect("a call task does not panic"));
    }
    let seconds = started.elapsed().as_secs_f64();
    let after = cpu_now(args);
    Measured {
        calls: total,
        errors: errors.load(Ordering::Relaxed),
        seconds,
        server_cpu: after.0 - before.0,
        own_cpu: after.1 - before.1,
        steal: after.2 - before.2,
        latencies,
        lags: Vec::new(),
    }
}

/// Open loop: calls at `rate` a second, each spawned at its scheduled instant.
async fn open_loop(args: &Args, rate: f64, clients: &[Client]) -> Measured {
    let requests = requests(args.descriptors);
    let warmup_calls = (rate * args.warmup).round() as u64;
    let measured_calls = (rate * args.seconds).round() as u64;
    let mut lags = Vec::with_capacity(measured_calls as usize);
    let mut answers = Vec::with_capacity(measured_calls as usize);
    let mut before = (0.0, 0.0, 0.0);
    let mut measured_from = Instant::now();
    let start = Instant::now();
    for at in 0..warmup_calls + measured_calls {
        let scheduled = start + Duration::from_secs_f64(at as f64 / rate);
        if at == warmup_calls {
            before = cpu_now(args);
            measured_from = scheduled;
        }
        // Spin until the call is due: each turn lets the runtime poll the sockets and run
        // the calls in flight.
        while Instant::now() < scheduled {
            tokio::task::yield_now().await;
        }
        let mut client = clients[at as usize % clients.len()].clone();
        let request = requests[at as usize % CALLERS].clone();
        let answer = tokio::spawn(async move {
            let answered = call(&mut client, request).await;
            answered.map(|()| nanos_since(scheduled))
        });
        if at >= warmup_calls {
            lags.push(nanos_since(scheduled));
            answers.push(answer);
        }
    }
    let seconds = measured_from.elapsed().as_secs_f64();
    let after = cpu_now(args);
    let (mut latencies, mut errors) = (Vec::with_capacity(answers.len()), 0);
    for answer in answers {
        match answer.await.expect("a call task does not panic") {
            Ok(latency) => latencies.push(latency),
            Err(()) => errors += 1,
        }
    }
    Measured {
        calls: measured_calls,
        errors,
        seconds,
        server_cpu: after.0 - before.0,
        own_cpu: after.1 - before.1,
        steal: after.2 - before.2,
        latencies,
        lags,
    }
}

/// The `per_mille`-th thousandth of `sorted`, in µs.
fn percentile(sorted: &[u64], per_mille: usize) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let at = (sorted.len() * per_mille)
        .div_ceil(1000)
        .clamp(1, sorted.len())
        - 1;
    sorted[at] as f64 / 1_000.0
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = args()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut measured = runtime.block_on(async {
        let mut clients = Vec::new();
        for _ in 0..args.connections {
            clients.push(connect(&args.address).await?);
        }
        Ok::<_, Box<dyn std::error::Error>>(match (args.rate, args.calls) {
            (Some(rate), _) => open_loop(&args, rate, &clients).await,
            (None, Some(total)) => fixed(&args, &clients, total).await,
            (None, None) => peak(&args, &clients).await,
        })
    })?;
    measured.latencies.sort_unstable();
    measured.lags.sort_unstable();
    let (calls, latencies) = (measured.calls, &measured.latencies);
    let figures = serde_json::json!({
        "calls": calls,
        "errors": measured.errors,
        "seconds": measured.seconds,
        "calls_per_second": calls as f64 / measured.seconds,
        "server_cpu_seconds": measured.server_cpu,
        "calls_per_cpu_second": calls as f64 / measured.server_cpu,
        "server_busy": measured.server_cpu / measured.seconds,
        "load_busy": measured.own_cpu / measured.seconds,
        "steal_ms": measured.steal * 1_000.0,
        "p50_us": percentile(latencies, 500),
        "p99_us": percentile(latencies, 990),
        "p999_us": percentile(latencies, 999),
        "max_us": latencies.last().map_or(f64::NAN, |&max| max as f64 / 1_000.0),
        "lag_p99_us": percentile(&measured.lags, 990),
        "lag_max_us": measured.lags.last().map_or(f64::NAN, |&max| max as f64 / 1_000.0),
    });
    println!("{figures}");
    Ok(())
}
