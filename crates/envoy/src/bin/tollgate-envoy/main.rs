//! `tollgate-envoy`: Envoy's rate limit service from a tollgate rule file, ready to run.
//!
//! ```text
//! tollgate-envoy serve --rules rules.toml [--redis redis://127.0.0.1:6379/] [--listen 127.0.0.1:8081]
//! tollgate-envoy check rules.toml
//! tollgate-envoy migrate ratelimit.yaml > rules.toml
//! ```
//!
//! Every `serve` flag can come from the environment instead (`TOLLGATE_RULES`,
//! `TOLLGATE_REDIS`, ...: `tollgate-envoy serve --help` lists them).

mod args;
mod incoming;
mod serve;
mod store;

use std::process::ExitCode;

use clap::Parser;

use args::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(settings) => serve::run(settings),
        Command::Check { file } => check(&file),
        Command::Migrate { file } => migrate(&file),
    }
}

/// Prints the descriptor rules `file` defines (exit 0) or its mistakes (exit 1).
fn check(file: &std::path::Path) -> ExitCode {
    let name = file.display().to_string();
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(error) => return fail(&format!("cannot read {name}: {error}")),
    };
    match tollgate_config::RuleFile::parse(&name, &text, &tollgate_config::Extractors::new()) {
        Ok(rules) => {
            for rule in rules.descriptor_rules() {
                let matcher = rule.matcher();
                let entries: Vec<String> = matcher
                    .entries()
                    .iter()
                    .map(|entry| match entry.value() {
                        tollgate_config::ValueMatch::Any => entry.key().to_owned(),
                        tollgate_config::ValueMatch::Prefix(prefix) => {
                            format!("{}={prefix}*", entry.key())
                        }
                        tollgate_config::ValueMatch::Exact(value) => {
                            format!("{}={value}", entry.key())
                        }
                    })
                    .collect();
                let quota = rule.rule().map_or_else(
                    || "unlimited".to_owned(),
                    |rule| {
                        let quota = rule.quota();
                        let per = quota.window().unwrap_or_else(|| quota.replenish_time());
                        format!(
                            "{} {} per {}",
                            quota.algorithm().name(),
                            quota.limit(),
                            humantime::format_duration(per)
                        )
                    },
                );
                say(&format!(
                    "{} [{}] {}: {quota}",
                    rule.id().as_str(),
                    matcher.domain(),
                    entries.join(", ")
                ));
            }
            ExitCode::SUCCESS
        }
        Err(errors) => fail(&errors.to_string()),
    }
}

/// Prints the rule file an envoyproxy/ratelimit YAML config becomes (exit 0) or what it cannot
/// express, at its lines (exit 1).
fn migrate(file: &std::path::Path) -> ExitCode {
    let name = file.display().to_string();
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(error) => return fail(&format!("cannot read {name}: {error}")),
    };
    match tollgate_envoy::migrate::migrate(&name, &text) {
        Ok(rules) => {
            say(rules.trim_end());
            ExitCode::SUCCESS
        }
        Err(errors) => fail(&errors.to_string()),
    }
}

/// Writes `text` to standard output.
fn say(text: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stdout(), "{text}");
}

/// Writes `text` to standard error; exit 1.
fn fail(text: &str) -> ExitCode {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{text}");
    ExitCode::FAILURE
}
