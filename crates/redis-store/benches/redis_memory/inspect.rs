//! Asking the server what keys cost: `INFO memory`, `MEMORY USAGE` and `ZCARD`, pipelined.

use redis::aio::MultiplexedConnection;

/// Commands per round trip when every key is asked about.
const PIPELINE: usize = 1_000;

/// One case's figures, per key.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Measured {
    /// Keys that still exist when measured (every one written, unless some expired).
    pub(crate) keys_held: usize,
    /// Mean `MEMORY USAGE` over the keys held, bytes.
    pub(crate) memory_usage: f64,
    /// Growth of `used_memory` divided by the keys held, bytes.
    pub(crate) used_memory: f64,
    /// Mean entries per key (`ZCARD`), for sorted sets.
    pub(crate) entries: Option<f64>,
}

/// Empties the server (`FLUSHALL SYNC`: freed before it answers) and answers its `used_memory`.
pub(crate) async fn empty(connection: &mut MultiplexedConnection) -> u64 {
    let () = query(connection, redis::cmd("FLUSHALL").arg("SYNC")).await;
    used_memory(connection).await
}

/// `SET name value PX px_ms` for every name.
pub(crate) async fn set_all(
    connection: &mut MultiplexedConnection,
    names: &[String],
    value: &str,
    px_ms: u64,
) {
    for chunk in names.chunks(PIPELINE) {
        let mut pipe = redis::pipe();
        for name in chunk {
            pipe.cmd("SET")
                .arg(name)
                .arg(value)
                .arg("PX")
                .arg(px_ms)
                .ignore();
        }
        let () = pipe
            .query_async(connection)
            .await
            .unwrap_or_else(|error| panic!("SET failed: {error}"));
    }
}

/// Measures `names` against the `used_memory` read before they were written; with
/// `count_entries`, also their mean `ZCARD`.
pub(crate) async fn measure(
    connection: &mut MultiplexedConnection,
    names: &[String],
    used_before: u64,
    count_entries: bool,
) -> Measured {
    // Read first: the pipelines below need buffers of their own.
    let used_after = used_memory(connection).await;
    let usage = per_key(connection, names, |name| {
        let mut command = redis::cmd("MEMORY");
        command.arg("USAGE").arg(name);
        command
    })
    .await;
    let held: Vec<u64> = usage.into_iter().flatten().collect();
    let keys_held = held.len().max(1);
    let entries = if count_entries {
        let counts = per_key(connection, names, |name| {
            let mut command = redis::cmd("ZCARD");
            command.arg(name);
            command
        })
        .await;
        Some(counts.into_iter().flatten().sum::<u64>() as f64 / keys_held as f64)
    } else {
        None
    };
    Measured {
        keys_held: held.len(),
        memory_usage: held.iter().sum::<u64>() as f64 / keys_held as f64,
        used_memory: used_after.saturating_sub(used_before) as f64 / keys_held as f64,
        entries,
    }
}

/// `command(name)` for every name, [`PIPELINE`] a round trip; `None` for a missing key.
async fn per_key(
    connection: &mut MultiplexedConnection,
    names: &[String],
    command: impl Fn(&str) -> redis::Cmd,
) -> Vec<Option<u64>> {
    let mut answers = Vec::with_capacity(names.len());
    for chunk in names.chunks(PIPELINE) {
        let mut pipe = redis::pipe();
        for name in chunk {
            pipe.add_command(command(name));
        }
        let chunk_answers: Vec<Option<u64>> = pipe
            .query_async(connection)
            .await
            .unwrap_or_else(|error| panic!("a pipelined inspection failed: {error}"));
        answers.extend(chunk_answers);
    }
    answers
}

/// `used_memory` from `INFO memory`.
async fn used_memory(connection: &mut MultiplexedConnection) -> u64 {
    let info: String = query(connection, redis::cmd("INFO").arg("memory")).await;
    info.lines()
        .find_map(|line| line.strip_prefix("used_memory:"))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no used_memory in INFO memory:\n{info}"))
}

async fn query<T: redis::FromRedisValue>(
    connection: &mut MultiplexedConnection,
    command: &redis::Cmd,
) -> T {
    command
        .query_async(connection)
        .await
        .unwrap_or_else(|error| panic!("redis command failed: {error}"))
}
