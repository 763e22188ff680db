//! `tollgate-sim`: scores limiting policies against Chirp's kinds of trouble.
//!
//! `cargo run --release -p tollgate-simulator` runs every scenario at full length against no
//! limits, a per-IP limit of 100 a minute and Chirp's layered limits, and prints a table;
//! `--csv` and `--charts` write the CSV and one SVG a scenario; rule files named on the
//! command line are scored too. Progress goes to stderr.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use tollgate_simulator::{
    Crowd, OtpAttack, OtpFraud, OutageAndFraud, Outcome, PartnerLoop, Policy, Scenario,
    SlowExports, Wave, report, simulate,
};

/// Scores rate-limiting policies against a sign-up wave, a partner stuck in a loop, a crowd
/// behind a carrier's NAT, a store outage during SMS fraud, one account's slow exports and
/// one-time-code fraud — in simulated time, through the real layer.
#[derive(Debug, Parser)]
#[command(name = "tollgate-sim", version)]
struct Args {
    /// Rule files to score besides the built-in policies (each checked as the gateway would).
    rule_files: Vec<PathBuf>,
    /// The scenarios to run.
    #[arg(long = "scenario", value_enum, default_values_t = [Which::Wave, Which::Partner, Which::Crowd, Which::Outage, Which::Slow, Which::Otp])]
    scenarios: Vec<Which>,
    /// The built-in policies to score.
    #[arg(long = "policy", value_enum, default_values_t = [BuiltIn::None, BuiltIn::PerIp, BuiltIn::Layered])]
    policies: Vec<BuiltIn>,
    /// The seed every scenario's traffic is drawn from.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Run every scenario this many times as long (0.1: a tenth; rates unchanged), above 0 and
    /// at most 10.
    #[arg(long, default_value_t = 1.0, value_parser = scale, allow_negative_numbers = true)]
    scale: f64,
    /// The per-IP policy's limit, requests a minute.
    #[arg(long, default_value_t = 100)]
    per_ip_limit: u64,
    /// The wave's attempts (over its 8 hours; scaled with --scale).
    #[arg(long, default_value_t = Wave::default().attempts)]
    wave_attempts: u64,
    /// The wave's cloud addresses (at most 254 a block).
    #[arg(long, default_value_t = Wave::default().addresses, value_parser = clap::value_parser!(u64).range(1..=130_048))]
    wave_addresses: u64,
    /// The /24 blocks the wave's addresses fall in.
    #[arg(long, default_value_t = Wave::default().blocks, value_parser = clap::value_parser!(u64).range(1..=512))]
    wave_blocks: u64,
    /// The device ids the wave's scripts reuse (0: they send none; at most 1,000,000,000).
    #[arg(long, default_value_t = Wave::default().devices, value_parser = clap::value_parser!(u64).range(0..=1_000_000_000))]
    wave_devices: u64,
    /// The partner loop's requests a second (at most 1,000,000: time is in microseconds).
    #[arg(long, default_value_t = PartnerLoop::default().loop_per_second, value_parser = rate, allow_negative_numbers = true)]
    loop_rate: f64,
    /// Users in the crowd.
    #[arg(long, default_value_t = Crowd::default().users)]
    crowd_users: u32,
    /// The NAT addresses they share (one /24 block).
    #[arg(long, default_value_t = Crowd::default().addresses, value_parser = clap::value_parser!(u64).range(1..=254))]
    crowd_addresses: u64,
    /// SMS pumping (the otp and outage scenarios): the attacker's code requests a second (at
    /// most 1,000,000; default 10).
    #[arg(long, alias = "fraud-rate", value_parser = rate, allow_negative_numbers = true)]
    otp_rate: Option<f64>,
    /// The attacker's addresses (at most 254 a block; default 50).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=130_048))]
    otp_addresses: Option<u64>,
    /// The /24 blocks its addresses fall in (1 to 512, at most one an address; default 4).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=512))]
    otp_blocks: Option<u64>,
    /// The premium numbers it asks codes for (at most 10,000 a range; default 2,000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    otp_numbers: Option<u64>,
    /// The number ranges they fall in (a range: a number but its last four digits; 1 to 1,000;
    /// default 20).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000))]
    otp_ranges: Option<u64>,
    /// Accounts the attacker makes first, one per this many codes (0: none, the default).
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=1_000_000_000))]
    otp_signs_up: Option<u64>,
    /// How long the attack lasts, hours; its scenario lasts as long (default: 1 for otp, 0.5
    /// for outage; scaled with --scale).
    #[arg(long, value_parser = hours, allow_negative_numbers = true)]
    otp_hours: Option<f64>,
    /// What sending one code costs, dollars (default 0.05).
    #[arg(long, value_parser = price, allow_negative_numbers = true)]
    sms_price: Option<f64>,
    /// The slow-exports scenario's exports a minute (one account, 30 s of work each).
    #[arg(long, default_value_t = SlowExports::default().exports_per_minute, value_parser = rate, allow_negative_numbers = true)]
    exports_per_minute: f64,
    /// Requests the service works on at once in the slow-exports scenario.
    #[arg(long, default_value_t = SlowExports::default().workers, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    workers: u32,
    /// Write the results as CSV here.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Write one SVG chart a scenario (`<scenario>.svg`) into this directory.
    #[arg(long)]
    charts: Option<PathBuf>,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
}

/// `--scale`: a finite number above 0, at most 10 (a longer run holds a second-by-second
/// series of its whole length).
fn scale(text: &str) -> Result<f64, String> {
    let factor: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number"))?;
    if factor.is_finite() && factor > 0.0 && factor <= 10.0 {
        Ok(factor)
    } else {
        Err(format!("{text} is not above 0 and at most 10"))
    }
}

/// A rate a second: finite, from 0 to 1,000,000 (arrivals are whole microseconds apart).
fn rate(text: &str) -> Result<f64, String> {
    let rate: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number"))?;
    if rate.is_finite() && (0.0..=1_000_000.0).contains(&rate) {
        Ok(rate)
    } else {
        Err(format!("{text} is not a rate from 0 to 1000000 a second"))
    }
}

/// `--otp-hours`: a second (1/3600) to 1,000 hours.
fn hours(text: &str) -> Result<f64, String> {
    let hours: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number"))?;
    if hours.is_finite() && hours * 3_600.0 >= 1.0 && hours <= 1_000.0 {
        Ok(hours)
    } else {
        Err(format!(
            "{text} is not from a second (0.0003) to 1000 hours"
        ))
    }
}

/// `--sms-price`: from 0 to 1,000 dollars.
fn price(text: &str) -> Result<f64, String> {
    let price: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number"))?;
    if (0.0..=1_000.0).contains(&price) {
        Ok(price)
    } else {
        Err(format!("{text} is not a price from 0 to 1000 dollars"))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Which {
    Wave,
    Partner,
    Crowd,
    Outage,
    Slow,
    Otp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BuiltIn {
    None,
    PerIp,
    Layered,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("tollgate-sim: {error}");
            ExitCode::from(2)
        }
    }
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let policies = policies(args)?;
    let scenarios = scenarios(args)?;
    let mut all: Vec<Outcome> = Vec::new();
    let mut out = std::io::stdout().lock();
    // The wall clock measures the simulator itself (requests simulated a second, by policy),
    // never the simulation.
    let mut speed: Vec<(u64, f64)> = vec![(0, 0.0); policies.len()];
    for scenario in &scenarios {
        let mut outcomes = Vec::new();
        for (policy, speed) in policies.iter().zip(&mut speed) {
            let bar = progress(args.quiet, scenario, policy);
            let started = Instant::now();
            let outcome = simulate(scenario, policy, args.seed, &mut |micros| {
                bar.set_position(micros / 1_000_000);
            })?;
            speed.1 += started.elapsed().as_secs_f64();
            speed.0 += outcome.score.requests;
            bar.finish_and_clear();
            outcomes.push(outcome);
        }
        report::write_table(&mut out, scenario, &outcomes)?;
        if let Some(directory) = &args.charts {
            std::fs::create_dir_all(directory)?;
            let path = directory.join(format!("{}.svg", scenario.name()));
            let mut file = std::io::BufWriter::new(std::fs::File::create(&path)?);
            report::write_chart(&mut file, scenario, &outcomes)?;
            file.flush()?;
            eprintln!("tollgate-sim: wrote {}", path.display());
        }
        all.extend(outcomes);
    }
    if let Some(path) = &args.csv {
        let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
        report::write_csv(&mut file, &all)?;
        file.flush()?;
        eprintln!("tollgate-sim: wrote {}", path.display());
    }
    for (policy, (requests, seconds)) in policies.iter().zip(speed) {
        eprintln!(
            "tollgate-sim: {}: simulated {requests} requests in {seconds:.1} s ({:.0} a second)",
            policy.name(),
            requests as f64 / seconds.max(1e-9)
        );
    }
    Ok(())
}

/// The built-in policies asked for, then the rule files (the first mistake stops the run,
/// with every mistake of that file at its line and column).
fn policies(args: &Args) -> Result<Vec<Policy>, tollgate_simulator::Error> {
    let mut policies = Vec::new();
    for built_in in &args.policies {
        policies.push(match built_in {
            BuiltIn::None => Policy::none()?,
            BuiltIn::PerIp => Policy::per_ip(args.per_ip_limit)?,
            BuiltIn::Layered => Policy::layered()?,
        });
    }
    for path in &args.rule_files {
        policies.push(Policy::from_file(path)?);
    }
    Ok(policies)
}

fn scenarios(args: &Args) -> Result<Vec<Scenario>, String> {
    if args.wave_addresses > 254 * args.wave_blocks {
        return Err(format!(
            "--wave-addresses {}: {} /24 blocks hold at most {} addresses",
            args.wave_addresses,
            args.wave_blocks,
            254 * args.wave_blocks
        ));
    }
    let scenarios: Vec<Scenario> = args
        .scenarios
        .iter()
        .map(|which| match which {
            Which::Wave => Scenario::Wave(Wave {
                attempts: args.wave_attempts,
                addresses: args.wave_addresses,
                blocks: args.wave_blocks,
                devices: args.wave_devices,
                ..Wave::default()
            }),
            Which::Partner => Scenario::Partner(PartnerLoop {
                loop_per_second: args.loop_rate,
                ..PartnerLoop::default()
            }),
            Which::Crowd => Scenario::Crowd(Crowd {
                users: args.crowd_users,
                addresses: args.crowd_addresses,
                ..Crowd::default()
            }),
            Which::Outage => {
                let outage = OutageAndFraud::default();
                Scenario::Outage(OutageAndFraud {
                    attack: attack(args, &outage.attack),
                    sms_price: args.sms_price.unwrap_or(outage.sms_price),
                    ..outage
                })
            }
            Which::Otp => {
                let otp = OtpFraud::default();
                Scenario::Otp(OtpFraud {
                    attack: attack(args, &otp.attack),
                    sms_price: args.sms_price.unwrap_or(otp.sms_price),
                    ..otp
                })
            }
            Which::Slow => Scenario::Slow(SlowExports {
                exports_per_minute: args.exports_per_minute,
                workers: args.workers,
                ..SlowExports::default()
            }),
        })
        .map(|scenario| scenario.scaled(args.scale))
        .collect();
    let attack = attack(args, &OtpAttack::default());
    if let Some(problem) = attack.problem() {
        return Err(format!("the --otp-* flags: {problem}"));
    }
    // As scaled: --scale stretches the attack, and an outage must fall within it.
    if let Some(problem) = scenarios.iter().find_map(Scenario::problem) {
        return Err(format!("the --otp-* flags (and --scale): {problem}"));
    }
    Ok(scenarios)
}

/// An SMS pumping attack: `defaults`, with each `--otp-*` flag given.
fn attack(args: &Args, defaults: &OtpAttack) -> OtpAttack {
    OtpAttack {
        per_second: args.otp_rate.unwrap_or(defaults.per_second),
        addresses: args.otp_addresses.unwrap_or(defaults.addresses),
        blocks: args.otp_blocks.unwrap_or(defaults.blocks),
        numbers: args.otp_numbers.unwrap_or(defaults.numbers),
        ranges: args.otp_ranges.unwrap_or(defaults.ranges),
        signs_up: args.otp_signs_up.unwrap_or(defaults.signs_up),
        hours: args.otp_hours.unwrap_or(defaults.hours),
    }
}

fn progress(quiet: bool, scenario: &Scenario, policy: &Policy) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(scenario.duration_micros() / 1_000_000);
    if let Ok(style) =
        ProgressStyle::with_template("{msg:<24} [{bar:40}] {pos}/{len} simulated s, {eta} left")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(format!("{} × {}", scenario.name(), policy.name()));
    bar
}
