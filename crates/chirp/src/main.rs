//! `cargo run -p chirp [-- --port N] [--demo] [--redis URL] [--rules FILE]`; `REDIS_URL` and
//! `ADMIN_TOKEN` from the environment. See the crate docs.

#![allow(clippy::print_stdout)] // A server talks to whoever started it.

use std::process::ExitCode;

use chirp::Options;

/// The options from the command line and environment, and whether to run the demo.
fn options() -> Result<(Options, bool), String> {
    let mut options = Options {
        redis: std::env::var("REDIS_URL")
            .ok()
            .filter(|url| !url.is_empty()),
        admin_token: std::env::var("ADMIN_TOKEN")
            .ok()
            .filter(|token| !token.is_empty()),
        ..Options::default()
    };
    let mut demo = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--demo" => demo = true,
            "--port" => {
                options.port = value("--port")?
                    .parse()
                    .map_err(|_| "--port takes a port number".to_owned())?
            }
            "--redis" => options.redis = Some(value("--redis")?),
            "--rules" => options.rules = value("--rules")?.into(),
            other => {
                return Err(format!(
                    "unknown argument {other:?}; use --port N, --demo, --redis URL, --rules FILE"
                ));
            }
        }
    }
    if demo && !std::env::args().any(|arg| arg == "--port") {
        options.port = 0;
    }
    Ok((options, demo))
}

#[tokio::main]
async fn main() -> ExitCode {
    // tollgate reports through `tracing`: store outages, refused rule edits, fall-backs. Shown
    // at `info` for tollgate, `warn` for the rest; `RUST_LOG` overrides.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,tollgate=info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let (options, demo) = match options() {
        Ok(parsed) => parsed,
        Err(problem) => {
            eprintln!("chirp: {problem}");
            return ExitCode::from(2);
        }
    };
    let running = match chirp::start(&options).await {
        Ok(running) => running,
        Err(error) => {
            eprintln!("chirp: cannot start on 127.0.0.1:{}: {error}", options.port);
            return ExitCode::from(1);
        }
    };
    let base = format!("http://{}", running.address);
    let store = options
        .redis
        .as_deref()
        .map_or("in memory".to_owned(), |url| format!("in Redis at {url}"));
    println!(
        "Chirp on {base} (counting {store}; rules from {})",
        options.rules.display()
    );
    if demo {
        println!("A short session against every limit:");
        let checks = chirp::demo::run(&base).await;
        return if chirp::demo::print(&checks) {
            println!("Every limit behaved as the table says.");
            ExitCode::SUCCESS
        } else {
            println!("Some limit did not behave as the table says.");
            ExitCode::from(1)
        };
    }
    println!("Try:");
    println!("  curl -i -H 'Authorization: Bearer ada' {base}/feed");
    println!(
        "  for i in $(seq 6); do curl -s -o /dev/null -w '%{{http_code}}\\n' -X POST -H 'Authorization: Bearer ada' {base}/posts; done"
    );
    println!(
        "  curl -i -X POST -H 'X-Device-Id: phone-1' {base}/signup   # the 4th in a day gets a challenge"
    );
    println!(
        "  curl -i -X POST -H 'content-type: application/json' -d '{{\"account\":\"ada\",\"password\":\"guess\"}}' {base}/login"
    );
    println!("  curl -i -H 'X-Api-Key: partner-small' {base}/partner/v1/feed");
    if options.admin_token.is_some() {
        println!(
            "  open {base}/admin (the status page; log in with ADMIN_TOKEN), curl {base}/metrics"
        );
    }
    println!("Ctrl-C stops it.");
    let _ = tokio::signal::ctrl_c().await;
    drop(running);
    ExitCode::SUCCESS
}
