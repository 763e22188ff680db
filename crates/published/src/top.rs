//! The top refused callers of a whole fleet: each gateway publishes its own top callers per
//! rule to Redis every few seconds, and any gateway merges them on request.
//!
//! Every `every` (100 ms to a day), a gateway writes one key,
//! `tollgate:top:{<fleet>}:gw:<gateway>` (its top callers per rule, expiring after three of its
//! intervals on the server's clock), and adds its name to the set
//! `tollgate:top:{<fleet>}:gateways` — one Lua call, one write per gateway per interval of at
//! most [`PUBLISHED_PER_RULE`] callers for each rule refused in the last hour. A report reads
//! every gateway whose key is still there (liveness is the key's expiry, so neither a gateway's
//! interval nor its clock hides another's) and sums each caller's counts. Two gateways started
//! under one name overwrite each other's reports; the second logs a warning. Callers are the layers' keyed
//! fingerprints, so give every gateway the same secret
//! (`KeyLogging::HashedWith(FingerprintSecret::from_bytes(..)?)`) for the same caller to match across
//! gateways. All keys share one hash tag: one slot on a Redis Cluster.
//!
//! **Error bound.** Like one gateway's, a caller's fleet `count` is never below its true count
//! and at most `error` above it: each gateway adds its own count and error for the caller, or —
//! where it did not list the caller — the most an unlisted caller may have had there
//! ([`TopRefusedReport::unlisted`](tollgate_tower::observe::top_refused::TopRefusedReport::unlisted)), to
//! both.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tollgate_core::RuleId;
use tollgate_tower::{LayerHandle, RateLimitLayer};

use super::PublishedRulesError;
use tollgate_redis::RedisConnection;

/// How many callers per rule each gateway publishes.
pub const PUBLISHED_PER_RULE: usize = 20;

/// Writes a gateway's report (its first line names the writing instance) and lists the gateway;
/// answers 1 when it replaced a live report of another instance under the same name.
const PUBLISH: &str = r"
local old = redis.call('GET', KEYS[1])
local clash = 0
if old and string.sub(old, 1, #ARGV[3]) ~= ARGV[3] then clash = 1 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('SADD', KEYS[2], ARGV[4])
redis.call('PEXPIRE', KEYS[2], 86400000)
return clash
";

/// Reads the report of every listed gateway whose key is still there, forgetting the others.
const READ: &str = r"
local reports = {}
for _, gateway in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local report = redis.call('GET', ARGV[1] .. gateway)
  if report then
    table.insert(reports, report)
  else
    redis.call('SREM', KEYS[1], gateway)
  end
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
    /// The first line of this instance's reports, to notice another under the same name.
    instance: String,
    every: Duration,
    /// Whether a clash of names was logged (once).
    clash_logged: std::sync::atomic::AtomicBool,
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
    /// `fleet` every `every` (100 ms to a day). Names are 1–64 letters, digits, `-`, `_`, `.`.
    /// Needs a tokio runtime.
    pub fn start<St: tollgate_core::Store>(
        connection: &RedisConnection,
        fleet: &str,
        gateway: &str,
        layer: &RateLimitLayer<St>,
        every: Duration,
    ) -> Result<FleetTopRefused, PublishedRulesError> {
        for name in [fleet, gateway] {
            if !super::valid_name(name) {
                return Err(PublishedRulesError::InvalidName(name.to_owned()));
            }
        }
        let every = every.clamp(Duration::from_millis(100), Duration::from_secs(86_400));
        let inner = Arc::new(Inner {
            connection: connection.clone(),
            gateway_key: format!("tollgate:top:{{{fleet}}}:gw:{gateway}"),
            gateways_key: format!("tollgate:top:{{{fleet}}}:gateways"),
            report_prefix: format!("tollgate:top:{{{fleet}}}:gw:"),
            gateway: gateway.to_owned(),
            instance: format!("i\t{gateway}\t{}\n", instance_id()),
            every,
            clash_logged: std::sync::atomic::AtomicBool::new(false),
        });
        let publishing = Arc::clone(&inner);
        let layer = layer.handle();
        let task = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(publishing.every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
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
        let reports: Vec<Vec<u8>> = inner
            .connection
            .query(
                redis::cmd("EVAL")
                    .arg(READ)
                    .arg(1)
                    .arg(&inner.gateways_key)
                    .arg(&inner.report_prefix),
            )
            .await?;
        let reports: Vec<String> = reports
            .iter()
            .map(|report| String::from_utf8_lossy(report).into_owned())
            .collect();
        Ok(merge(&reports, rule.as_str(), n))
    }
}

impl Inner {
    /// Writes this gateway's report: its instance line, then per rule refused in the last hour
    /// an `u\trule\tunlisted` line and a `c\trule\tcaller\tcount\terror` line per listed caller.
    async fn publish(&self, layer: &LayerHandle) -> redis::RedisResult<()> {
        let mut report = self.instance.clone();
        for rule in layer.top_refused_rules() {
            let Some(top) = layer.top_refused(&rule, PUBLISHED_PER_RULE) else {
                continue;
            };
            if top.refusals == 0 {
                continue;
            }
            let rule = rule.as_str();
            let _ = writeln!(report, "u\t{rule}\t{}", top.unlisted);
            for caller in top.callers {
                let (name, count, error) = (clean(&caller.caller), caller.count, caller.error);
                let _ = writeln!(report, "c\t{rule}\t{name}\t{count}\t{error}");
            }
        }
        let ttl = u64::try_from((self.every * 3).as_millis()).unwrap_or(u64::MAX);
        let clash: i64 = self
            .connection
            .query(
                redis::cmd("EVAL")
                    .arg(PUBLISH)
                    .arg(2)
                    .arg(&self.gateway_key)
                    .arg(&self.gateways_key)
                    .arg(report)
                    .arg(ttl)
                    .arg(&self.instance)
                    .arg(&self.gateway),
            )
            .await?;
        if clash == 1
            && !self
                .clash_logged
                .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            tracing::warn!(target: "tollgate::fleet", gateway = %self.gateway, "another gateway publishes its top refused callers under the same name; the two overwrite each other: give each gateway its own name");
        }
        Ok(())
    }
}

/// A caller as one field of a line: tabs and line breaks replaced.
fn clean(caller: &str) -> String {
    caller.replace(['\t', '\n', '\r'], " ")
}

/// What one gateway listed for a rule: its callers (count, error) and the most an unlisted
/// caller may have had there.
struct Listed<'r> {
    callers: HashMap<&'r str, (u64, u64)>,
    unlisted: u64,
}

/// Sums `rule`'s callers over the gateways' `reports`.
fn merge(reports: &[String], rule: &str, n: usize) -> Vec<FleetCaller> {
    let per_gateway: Vec<Listed<'_>> = reports
        .iter()
        .map(|report| {
            let mut listed = Listed {
                callers: HashMap::new(),
                unlisted: 0,
            };
            for line in report.lines() {
                let fields: Vec<&str> = line.split('\t').collect();
                match fields.as_slice() {
                    ["u", listed_rule, unlisted] if *listed_rule == rule => {
                        listed.unlisted = unlisted.parse().unwrap_or(0);
                    }
                    ["c", listed_rule, caller, count, error] if *listed_rule == rule => {
                        let (Ok(count), Ok(error)) = (count.parse(), error.parse()) else {
                            continue;
                        };
                        listed.callers.insert(caller, (count, error));
                    }
                    _ => {}
                }
            }
            listed
        })
        .collect();
    let mut names: Vec<&str> = per_gateway
        .iter()
        .flat_map(|listed| listed.callers.keys().copied())
        .collect();
    names.sort_unstable();
    names.dedup();
    let mut callers: Vec<FleetCaller> = names
        .into_iter()
        .map(|name| {
            let (count, error) = per_gateway
                .iter()
                .fold((0u64, 0u64), |(count, error), listed| {
                    let (more, uncertain) = listed
                        .callers
                        .get(name)
                        .copied()
                        .unwrap_or((listed.unlisted, listed.unlisted));
                    (count.saturating_add(more), error.saturating_add(uncertain))
                });
            FleetCaller {
                caller: name.to_owned(),
                count,
                error,
            }
        })
        .collect();
    callers.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.caller.cmp(&b.caller)));
    callers.truncate(n);
    callers
}

/// An id for this instance (process id and start time in nanoseconds), to tell two gateways
/// under one name apart.
fn instance_id() -> String {
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos());
    format!("{:x}-{started:x}", std::process::id())
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
    fn counts_and_errors_add_across_gateways_and_unlisted_callers_are_allowed_for() {
        let reports = [
            "i\teast\t1\nu\tlogin\t4\nc\tlogin\tabc\t30\t0\nc\tlogin\tdef\t5\t1\nu\tsignup\t0\nc\tsignup\tabc\t9\t0\n".to_owned(),
            "i\twest\t2\nu\tlogin\t2\nc\tlogin\tabc\t12\t3\n".to_owned(),
        ];
        let merged = merge(&reports, "login", 10);
        assert_eq!(merged.len(), 2);
        // abc: listed by both; def: listed by east, up to 2 unlisted at west.
        assert_eq!(
            (merged[0].caller.as_str(), merged[0].count, merged[0].error),
            ("abc", 42, 3)
        );
        assert_eq!(
            (merged[1].caller.as_str(), merged[1].count, merged[1].error),
            ("def", 7, 3)
        );
        assert_eq!(merge(&reports, "signup", 10)[0].count, 9);
        let hostile = vec!["c\tlogin\tx\t18446744073709551615\t0\n".to_owned(); 2];
        assert_eq!(
            merge(&hostile, "login", 1)[0].count,
            u64::MAX,
            "saturates, never panics"
        );
    }
}
