//! How far the Redis server's clock is ahead of this gateway's, learned from the "now" every
//! script answers with: what turns a caller's deadline into the server's time, so a script that
//! starts after its caller stopped waiting charges nothing (see `lua/main.lua`).
//!
//! Each answer bounds the offset from below: the server read its `TIME` before the answer
//! arrived, so `offset ≥ server_now − arrival` (arrival on a monotonic clock of this gateway,
//! which never steps). The estimate is the highest such bound of the last two periods of
//! [`PERIOD`]: never above the true offset, so the server's deadline is never later than the
//! caller's, and a server clock stepped back is forgotten within two periods. (A check may be
//! declined in the last round trip before the caller's deadline: the bound is short of the true
//! offset by about the best round trip seen.)

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long one period's bound is kept (a server clock stepped back weighs for at most two).
const PERIOD: Duration = Duration::from_secs(10);

/// The server clock's offset, as learned so far.
#[derive(Debug)]
pub(crate) struct ServerClock {
    /// What this gateway's monotonic micros count from.
    base: Instant,
    learned: Mutex<Learned>,
}

#[derive(Debug, Default)]
struct Learned {
    /// Which period (since `base`) `current` belongs to.
    period: u64,
    /// The highest bound seen this period and the one before (`None`: none seen).
    current: Option<i64>,
    previous: Option<i64>,
}

impl ServerClock {
    pub(crate) fn new() -> Self {
        ServerClock {
            base: Instant::now(),
            learned: Mutex::default(),
        }
    }

    fn micros_since_base(&self, at: Instant) -> i64 {
        i64::try_from(at.saturating_duration_since(self.base).as_micros()).unwrap_or(i64::MAX)
    }

    /// Learns from an answer stamped `server_now` (µs) that arrived `at`.
    pub(crate) fn observe(&self, server_now: i64, at: Instant) {
        let local = self.micros_since_base(at);
        let bound = server_now.saturating_sub(local);
        let period = u64::try_from(local).unwrap_or(0) / PERIOD.as_micros() as u64;
        let mut learned = self.learned.lock().unwrap_or_else(PoisonError::into_inner);
        if period != learned.period {
            learned.previous = if period == learned.period + 1 {
                learned.current
            } else {
                None
            };
            learned.current = None;
            learned.period = period;
        }
        learned.current = Some(learned.current.map_or(bound, |held| held.max(bound)));
    }

    /// `deadline` on the server's clock (µs), once an answer has taught the offset; `None`
    /// before (the call then carries no deadline).
    pub(crate) fn server_time(&self, deadline: Instant) -> Option<u64> {
        let learned = self.learned.lock().unwrap_or_else(PoisonError::into_inner);
        let offset = match (learned.current, learned.previous) {
            (Some(current), Some(previous)) => current.max(previous),
            (Some(one), None) | (None, Some(one)) => one,
            (None, None) => return None,
        };
        drop(learned);
        let server = self.micros_since_base(deadline).saturating_add(offset);
        u64::try_from(server).ok().filter(|&micros| micros > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offset_is_the_highest_lower_bound_and_old_periods_are_forgotten() {
        let clock = ServerClock::new();
        let base = clock.base;
        assert_eq!(clock.server_time(base + Duration::from_secs(1)), None);
        // The server is 5 s ahead; answers arrive 300 µs and 100 µs after its TIME.
        let ahead = 5_000_000;
        clock.observe(ahead + 1_000 - 300, base + Duration::from_micros(1_000));
        clock.observe(ahead + 2_000 - 100, base + Duration::from_micros(2_000));
        assert_eq!(
            clock.server_time(base + Duration::from_millis(50)),
            Some(ahead as u64 + 50_000 - 100),
            "never later than the true deadline, by the best round trip"
        );
        // The server's clock steps back 4 s: the higher bound weighs for two periods at most.
        let later = base + PERIOD * 2 + Duration::from_millis(1);
        clock.observe(1_000_000 + clock.micros_since_base(later), later);
        let after = base + PERIOD * 3 + Duration::from_millis(1);
        clock.observe(1_000_000 + clock.micros_since_base(after), after);
        let deadline = after + Duration::from_millis(10);
        assert_eq!(
            clock.server_time(deadline),
            Some(1_000_000 + clock.micros_since_base(deadline) as u64)
        );
    }
}
