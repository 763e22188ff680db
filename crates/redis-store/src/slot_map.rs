//! Which master serves each hash slot of a Redis Cluster, as `CLUSTER SLOTS` says, read every
//! second in the background: a `FallbackStore` keeps a circuit breaker per master
//! (`Store::node_of`), so a dead master opens only the breaker of the keys it serves.

use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use redis::Value;
use redis::cluster_async::ClusterConnection;

use crate::connecting::Connecting;

/// How often the map is read again (a failover takes the cluster's node timeout, seconds).
const EVERY: Duration = Duration::from_secs(1);

/// Slot ranges and the address (`host:port`) of the master serving each, sorted by start.
#[derive(Default)]
pub(crate) struct SlotMap {
    ranges: RwLock<Vec<(u16, u16, Arc<str>)>>,
}

impl SlotMap {
    /// The master serving `slot`, once the map has been read.
    pub(crate) fn node_of(&self, slot: u16) -> Option<Arc<str>> {
        let ranges = self
            .ranges
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let at = ranges.partition_point(|(start, _, _)| *start <= slot);
        let (start, end, node) = ranges.get(at.checked_sub(1)?)?;
        (*start <= slot && slot <= *end).then(|| Arc::clone(node))
    }

    fn replace(&self, mut ranges: Vec<(u16, u16, Arc<str>)>) {
        ranges.sort_by_key(|(start, _, _)| *start);
        *self
            .ranges
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = ranges;
    }
}

/// Reads the slot map of `cluster` into `map` now and every [`EVERY`], until `map` is dropped.
pub(crate) fn follow(cluster: Connecting<ClusterConnection>, map: Weak<SlotMap>) {
    tokio::spawn(async move {
        loop {
            let Some(into) = map.upgrade() else { return };
            if let Some(connection) = cluster.get() {
                let mut connection = connection.clone();
                let read: redis::RedisResult<Value> = redis::cmd("CLUSTER")
                    .arg("SLOTS")
                    .query_async(&mut connection)
                    .await;
                // A failed read keeps the last map: a node that does not answer keeps its slots.
                if let Ok(answer) = read {
                    into.replace(parse(&answer));
                }
            }
            drop(into);
            tokio::time::sleep(EVERY).await;
        }
    });
}

/// `CLUSTER SLOTS`: `[[start, end, [host, port, id, ...], replicas...], ...]`.
fn parse(answer: &Value) -> Vec<(u16, u16, Arc<str>)> {
    let Value::Array(entries) = answer else {
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|entry| {
            let Value::Array(fields) = entry else {
                return None;
            };
            let start = u16::try_from(int(fields.first()?)?).ok()?;
            let end = u16::try_from(int(fields.get(1)?)?).ok()?;
            let Value::Array(master) = fields.get(2)? else {
                return None;
            };
            let host = text(master.first()?)?;
            let port = int(master.get(1)?)?;
            Some((start, end, Arc::from(format!("{host}:{port}"))))
        })
        .collect()
}

fn int(value: &Value) -> Option<i64> {
    match value {
        Value::Int(number) => Some(*number),
        _ => None,
    }
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
        Value::SimpleString(text) | Value::VerbatimString { text, .. } => Some(text.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(start: i64, end: i64, port: i64) -> Value {
        Value::Array(vec![
            Value::Int(start),
            Value::Int(end),
            Value::Array(vec![
                Value::BulkString(b"127.0.0.1".to_vec()),
                Value::Int(port),
                Value::BulkString(b"id".to_vec()),
            ]),
        ])
    }

    #[test]
    fn each_slot_maps_to_the_master_serving_its_range() {
        let map = SlotMap::default();
        assert_eq!(map.node_of(0), None, "not read yet");
        map.replace(parse(&Value::Array(vec![
            entry(10923, 16383, 7002),
            entry(0, 5460, 7000),
            entry(5461, 10922, 7001),
        ])));
        assert_eq!(map.node_of(0).as_deref(), Some("127.0.0.1:7000"));
        assert_eq!(map.node_of(5461).as_deref(), Some("127.0.0.1:7001"));
        assert_eq!(map.node_of(16383).as_deref(), Some("127.0.0.1:7002"));
        map.replace(parse(&Value::Array(vec![entry(0, 100, 7000)])));
        assert_eq!(map.node_of(101), None, "a slot no master serves");
        assert!(
            parse(&Value::Int(3)).is_empty(),
            "a malformed answer maps nothing"
        );
    }
}
