//! What a client has been told to wait for: per host (a 429 or 503 with a wait), and per host,
//! method and path (a response saying a policy has nothing left, `r=0` with `t=N`). Shared by
//! every request through one client, bounded in size.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::time::Instant;

/// The most entries a cool-down table keeps: far more hosts than one client talks to. Past it,
/// entries that have ended go first, then route waits, then host waits, soonest first.
pub const DEFAULT_MAX_ENTRIES: usize = 4_096;

/// What waits are in force for a client's requests, shared by its clones.
///
/// A host that said "wait 30 s" (a 429 or 503 with `Retry-After`) holds every request to that
/// host until then ([`hold_host`](Self::hold_host)); a response saying a policy has nothing left
/// (`RateLimit: "p";r=0;t=N`) holds later requests with the same method and path on that host
/// for N seconds ([`hold_route`](Self::hold_route)) — a client cannot know which other paths a policy
/// covers.
///
/// ```
/// use std::time::Duration;
/// use tokio::time::Instant;
/// use tollgate_client::CoolDowns;
///
/// let table = CoolDowns::new(16);
/// let now = Instant::now();
/// table.hold_host("api.example", now + Duration::from_secs(30));
/// assert_eq!(table.until("api.example", "GET", "/feed", now), Some(now + Duration::from_secs(30)));
/// assert_eq!(table.until("other.example", "GET", "/feed", now), None);
/// ```
#[derive(Debug, Clone)]
pub struct CoolDowns {
    table: Arc<Mutex<Table>>,
}

#[derive(Debug)]
struct Table {
    max: usize,
    entries: HashMap<Scope, Instant>,
}

/// What a wait covers: a whole host, or one method and path on it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Scope {
    Host(String),
    Route {
        host: String,
        method: String,
        path: String,
    },
}

impl Default for CoolDowns {
    fn default() -> Self {
        CoolDowns::new(DEFAULT_MAX_ENTRIES)
    }
}

impl CoolDowns {
    /// A table of at most `max` entries (at least 1).
    pub fn new(max: usize) -> Self {
        CoolDowns {
            table: Arc::new(Mutex::new(Table {
                max: max.max(1),
                entries: HashMap::new(),
            })),
        }
    }

    /// Holds every request to `host` until `until` (a later wait already in force stays).
    pub fn hold_host(&self, host: &str, until: Instant) {
        self.hold(Scope::Host(host.to_owned()), until);
    }

    /// Holds requests to `host` with `method` and `path` until `until`.
    pub fn hold_route(&self, host: &str, method: &str, path: &str, until: Instant) {
        self.hold(
            Scope::Route {
                host: host.to_owned(),
                method: method.to_owned(),
                path: path.to_owned(),
            },
            until,
        );
    }

    /// Until when a request to `host` with `method` and `path` must wait, if it must: the later
    /// of the host's and the route's waits still in force at `now`.
    pub fn until(&self, host: &str, method: &str, path: &str, now: Instant) -> Option<Instant> {
        let table = self.table.lock();
        let host_wait = table.entries.get(&Scope::Host(host.to_owned())).copied();
        let route_wait = table
            .entries
            .get(&Scope::Route {
                host: host.to_owned(),
                method: method.to_owned(),
                path: path.to_owned(),
            })
            .copied();
        host_wait.max(route_wait).filter(|until| *until > now)
    }

    /// How many waits are remembered (some may have ended).
    pub fn len(&self) -> usize {
        self.table.lock().entries.len()
    }

    /// Whether no wait is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn hold(&self, scope: Scope, until: Instant) {
        let mut table = self.table.lock();
        if let Some(held) = table.entries.get_mut(&scope) {
            *held = (*held).max(until);
            return;
        }
        if table.entries.len() >= table.max {
            table.make_room(Instant::now());
        }
        table.entries.insert(scope, until);
    }
}

impl Table {
    /// Drops the waits that have ended, then, until a sixteenth of the table is free, route
    /// waits ending soonest (a route wait only spares a refusal; a host's wait is what keeps a
    /// crowd of requests off a host that asked), then host waits ending soonest. One scan frees
    /// room for many inserts.
    fn make_room(&mut self, now: Instant) {
        self.entries.retain(|_, until| *until > now);
        let wanted = (self.max / 16).max(1);
        let free = self.max.saturating_sub(self.entries.len());
        if free >= wanted {
            return;
        }
        let mut order: Vec<(bool, Instant, Scope)> = self
            .entries
            .iter()
            .map(|(scope, until)| (matches!(scope, Scope::Host(_)), *until, scope.clone()))
            .collect();
        order.sort_unstable_by_key(|(is_host, until, _)| (*is_host, *until));
        for (_, _, scope) in order.into_iter().take(wanted - free) {
            self.entries.remove(&scope);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_later_wait_holds_and_routes_are_their_own() {
        let table = CoolDowns::new(8);
        let now = Instant::now();
        let (soon, late) = (now + Duration::from_secs(5), now + Duration::from_secs(50));
        table.hold_host("h", late);
        table.hold_host("h", soon);
        assert_eq!(table.until("h", "GET", "/", now), Some(late));
        table.hold_route("g", "GET", "/feed", soon);
        assert_eq!(table.until("g", "GET", "/feed", now), Some(soon));
        assert_eq!(table.until("g", "POST", "/feed", now), None);
        assert_eq!(table.until("g", "GET", "/other", now), None);
        assert_eq!(table.until("g", "GET", "/feed", soon), None, "ended");
    }

    #[test]
    fn the_table_stays_bounded() {
        let table = CoolDowns::new(4);
        let now = Instant::now();
        for n in 0..100_u64 {
            table.hold_host(&format!("host{n}"), now + Duration::from_secs(n + 1));
        }
        assert_eq!(table.len(), 4);
        assert!(
            table.until("host99", "GET", "/", now).is_some(),
            "the newest stays"
        );
    }
}
