//! The top refused callers of a whole fleet: each gateway publishes its own top callers per
//! rule to Redis every few seconds, and any gateway merges them on request.
//!
//! Every `every` (default 5 s), a gateway writes one key, `tollgate:top:{<fleet>}:gw:<gateway>`
//! (its top callers per rule, expiring after three intervals), and stamps its name in the sorted
//! set `tollgate:top:{<fleet>}:gateways` — one Lua call, one bounded write per gateway per
//! interval (at most [`PUBLISHED_PER_RULE`] callers per rule). A report reads the gateways seen
//! within three intervals and sums each caller's counts. Callers are the layers' keyed
//! fingerprints, so give every gateway the same secret
//! (`KeyLogging::HashedWith(FingerprintSecret::from_bytes(..)?)`) for the same caller to match across
//! gateways. All keys share one hash tag: one slot on a Redis Cluster.
//!
//! **Error bound.** A caller's fleet count adds what each gateway listed for it; where a gateway
//! listed its full top [`PUBLISHED_PER_RULE`] without it, up to that gateway's smallest listed
//! count is added to its error (the caller may have been refused there that often, unlisted).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tollgate_core::RuleId;
use tollgate_tower::RateLimitLayer;

use super::{FleetError, now_ms};
use crate::RedisConnection;

/// How many callers per rule each gateway publishes.
pub const PUBLISHED_PER_RULE: usize = 20;

/// Writes a gateway's report and stamps it, dropping gateways not seen for three intervals.
const PUBLISH: &str = r"
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[3] - ARGV[2])
return 1
";

/// Reads the reports of the gateways seen within `ARGV[2]` ms of `ARGV[1]`.
const READ: &str = r"
local gateways = redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[1] - ARGV[2], '+inf')
local reports = {}
for _, gateway in ipairs(gateways) do
  local report = redis.call('GET', ARGV[3] .. gateway)
  if report then table.insert(reports, report) end
end
return reports
";

/// A gateway publishing its top refused callers, and reading the fleet's. Dropping it stops
/// publishing (its report expires after three intervals).
pub struct FleetTopRefused {
    inner: Arc<Inner>,
    task: JoinHandle<()>,
}

struct Inner {
    connection: RedisConnection,
    gateway_key: String,
    gateways_key: String,
    report_prefix: String,
    gateway: String,
    every: Duration,
}

/// One caller across the fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FleetCaller {
    /// The caller, as the gateways' key logging shows it.
    pub caller: String,
    /// Refusals the gateways listed for it over their last hour.
    pub count: u64,
    /// How far `count` may be from its true fleet count (see the module docs).
    pub error: u64,
}

impl FleetTopRefused {
    /// Publishes `layer`'s top refused callers (it must
    /// [`track_top_refused`](RateLimitLayer::track_top_refused)) as gateway `gateway` of fleet
    /// `fleet` every `every` (at least 100 ms). Names are 1–64 letters, digits, `-`, `_`, `.`.
    /// Needs a tokio runtime.
    pub fn start<St: Send + Sync + 'static>(
        connection: &RedisConnection,
        fleet: &str,
        gateway: &str,
        layer: &RateLimitLayer<St>,
        every: Duration,
    ) -> Result<FleetTopRefused, FleetError> {
        for name in [fleet, gateway] {
            if !super::valid_name(name) {
                return Err(FleetError::InvalidName(name.to_owned()));
            }
        }
        let every = every.max(Duration::from_millis(100));
        let inner = Arc::new(Inner {
            connection: connection.clone(),
            gateway_key: format!("tollgate:top:{{{fleet}}}:gw:{gateway}"),
            gateways_key: format!("tollgate:top:{{{fleet}}}:gateways"),
            report_prefix: format!("tollgate:top:{{{fleet}}}:gw:"),
            gateway: gateway.to_owned(),
            every,
        });
        let publishing = Arc::clone(&inner);
        let layer = layer.clone();
        let task = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(publishing.every);
            loop {
                ticks.tick().await;
                if let Err(error) = publishing.publish(&layer).await {
                    tracing::debug!(target: "tollgate::fleet", %error, "cannot publish the top refused callers");
                }
            }
        });
        Ok(FleetTopRefused { inner, task })
    }

    /// The fleet's `n` most refused callers of `rule`, from every gateway seen within three
    /// intervals.
    pub async fn report(&self, rule: &RuleId, n: usize) -> redis::RedisResult<Vec<FleetCaller>> {
        let inner = &self.inner;
        let window = (inner.every * 3).as_millis();
        let reports: Vec<String> = inner
            .connection
            .query(
                redis::cmd("EVAL")
                    .arg(READ)
                    .arg(1)
                    .arg(&inner.gateways_key)
                    .arg(now_ms())
                    .arg(u64::try_from(window).unwrap_or(u64::MAX))
                    .arg(&inner.report_prefix),
            )
            .await?;
        Ok(merge(&reports, rule.as_str(), n))
    }
}

impl Inner {
    /// Writes this gateway's report: per rule, its top callers, one `rule\tcaller\tcount` line
    /// each.
    async fn publish<St>(&self, layer: &RateLimitLayer<St>) -> redis::RedisResult<()> {
        let mut report = String::new();
        for rule in layer.top_refused_rules() {
            let Some(top) = layer.top_refused(&rule, PUBLISHED_PER_RULE) else {
                continue;
            };
            for caller in top.callers {
                let _ = writeln!(
                    report,
                    "{}\t{}\t{}",
                    rule.as_str(),
                    clean(&caller.caller),
                    caller.count
                );
            }
        }
        let ttl = u64::try_from((self.every * 3).as_millis()).unwrap_or(u64::MAX);
        let _: i64 = self
            .connection
            .query(
                redis::cmd("EVAL")
                    .arg(PUBLISH)
                    .arg(2)
                    .arg(&self.gateway_key)
                    .arg(&self.gateways_key)
                    .arg(report)
                    .arg(ttl)
                    .arg(now_ms())
                    .arg(&self.gateway),
            )
            .await?;
        Ok(())
    }
}

/// A caller as one field of a line: tabs and line breaks replaced.
fn clean(caller: &str) -> String {
    caller.replace(['\t', '\n', '\r'], " ")
}

/// Sums `rule`'s callers over the gateways' `reports`.
fn merge(reports: &[String], rule: &str, n: usize) -> Vec<FleetCaller> {
    let per_gateway: Vec<Vec<(&str, u64)>> = reports
        .iter()
        .map(|report| {
            report
                .lines()
                .filter_map(|line| {
                    let mut fields = line.split('\t');
                    let (listed_rule, caller, count) =
                        (fields.next()?, fields.next()?, fields.next()?);
                    (listed_rule == rule).then_some((caller, count.parse().ok()?))
                })
                .collect()
        })
        .collect();
    let mut merged: HashMap<&str, FleetCaller> = HashMap::new();
    for listed in &per_gateway {
        for (caller, count) in listed {
            let entry = merged.entry(caller).or_insert_with(|| FleetCaller {
                caller: (*caller).to_owned(),
                count: 0,
                error: 0,
            });
            entry.count += count;
        }
    }
    for listed in &per_gateway {
        if listed.len() < PUBLISHED_PER_RULE {
            continue;
        }
        let floor = listed.iter().map(|(_, count)| *count).min().unwrap_or(0);
        for (caller, entry) in merged.iter_mut() {
            if !listed
                .iter()
                .any(|(listed_caller, _)| listed_caller == caller)
            {
                entry.error += floor;
            }
        }
    }
    let mut callers: Vec<FleetCaller> = merged.into_values().collect();
    callers.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.caller.cmp(&b.caller)));
    callers.truncate(n);
    callers
}

impl Drop for FleetTopRefused {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl std::fmt::Debug for FleetTopRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetTopRefused")
            .field("gateway", &self.inner.gateway)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::merge;

    #[test]
    fn counts_add_across_gateways_for_the_rule_asked() {
        let reports = [
            "login\tabc\t30\nlogin\tdef\t5\nsignup\tabc\t9\n".to_owned(),
            "login\tabc\t12\n".to_owned(),
        ];
        let merged = merge(&reports, "login", 10);
        assert_eq!(merged.len(), 2);
        assert_eq!((merged[0].caller.as_str(), merged[0].count), ("abc", 42));
        assert_eq!((merged[1].caller.as_str(), merged[1].count), ("def", 5));
        assert_eq!(merge(&reports, "signup", 10)[0].count, 9);
    }
}
