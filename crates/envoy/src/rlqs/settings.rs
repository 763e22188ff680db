//! What a quota service's assignments are made of: how long one lasts, the largest lease, and
//! when a quiet bucket is abandoned.

use std::time::Duration;

use tollgate_core::Quota;

/// How long an assignment lasts by default: renewed at the first report in its second half,
/// and Envoy 1.40 reports every 5 s (whatever the bucket's `reporting_interval` says), so one
/// report always comes with at least 2.5 s to spare.
pub(crate) const DEFAULT_TTL: Duration = Duration::from_secs(15);

/// A lease is at most this share of a limit by default (⌈C/10⌉).
pub(crate) const DEFAULT_LEASES_PER_LIMIT: u64 = 10;

/// How long a bucket may report no requests before it is abandoned, by default.
pub(crate) const DEFAULT_ABANDON_AFTER: Duration = Duration::from_secs(60);

/// The most units one lease takes, whatever the limit: Envoy's token bucket counts in a `u32`,
/// and starts full by dating its last fill `max_tokens × fill_interval` back, which must stay
/// far inside its clock's range.
pub(crate) const MAX_LEASE: u64 = 1 << 20;

/// The numbers a quota service's assignments are made with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Settings {
    /// Every assignment's time to live: whole seconds, at least one (Envoy reads only the
    /// seconds of `assignment_time_to_live`, and expires an assignment of 0 at once).
    pub(crate) ttl: Duration,
    /// A lease is at most ⌈C / this⌉ units of a limit C (at least 1).
    pub(crate) leases_per_limit: u64,
    /// A bucket reporting no requests for this long is abandoned.
    pub(crate) abandon_after: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            ttl: DEFAULT_TTL,
            leases_per_limit: DEFAULT_LEASES_PER_LIMIT,
            abandon_after: DEFAULT_ABANDON_AFTER,
        }
    }
}

impl Settings {
    /// The largest lease of `quota`: ⌈C / leases_per_limit⌉, at least 1, at most [`MAX_LEASE`].
    pub(crate) fn max_lease(&self, quota: &Quota) -> u64 {
        quota
            .limit()
            .div_ceil(self.leases_per_limit.max(1))
            .clamp(1, MAX_LEASE)
    }

    /// The fill interval of an assigned token bucket: one second longer than an assignment
    /// lives, so no token is added to a bucket before it expires or is replaced.
    pub(crate) fn fill_interval(&self) -> Duration {
        self.ttl + Duration::from_secs(1)
    }
}

/// `duration` in whole seconds, rounded down, at least one second.
pub(crate) fn whole_seconds(duration: Duration) -> Duration {
    Duration::from_secs(duration.as_secs().max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_a_tenth_of_the_limit_rounded_up_and_at_least_one() {
        let settings = Settings::default();
        let minute = Duration::from_secs(60);
        let lease = |limit| settings.max_lease(&Quota::fixed_window(limit, minute).unwrap());
        assert_eq!((lease(100), lease(95), lease(3), lease(1)), (10, 10, 1, 1));
        let huge = Quota::fixed_window(1 << 40, minute).unwrap();
        assert_eq!(settings.max_lease(&huge), MAX_LEASE);
        let whole = Settings {
            leases_per_limit: 1,
            ..settings
        };
        assert_eq!(whole.max_lease(&Quota::fixed_window(7, minute).unwrap()), 7);
    }

    #[test]
    fn times_to_live_are_whole_seconds_and_buckets_never_refill_within_one() {
        assert_eq!(
            whole_seconds(Duration::from_millis(2_900)),
            Duration::from_secs(2)
        );
        assert_eq!(
            whole_seconds(Duration::from_millis(300)),
            Duration::from_secs(1)
        );
        assert_eq!(Settings::default().fill_interval(), Duration::from_secs(16));
    }
}
