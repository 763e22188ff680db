//! What a rule allows: an algorithm and its numbers, validated once.

use std::time::Duration;

use crate::clock::micros_ceil;
use crate::{QuotaError, Rate};

/// The longest period, window or delay tollgate accepts: 366 days.
pub const MAX_PERIOD: Duration = Duration::from_secs(366 * 86_400);

/// The most entries a sliding window log may keep per key, and the largest concurrency limit
/// (a remote store keeps one entry per slot held).
pub const MAX_LOG_LIMIT: u64 = 100_000;

/// Every derived time span stays below 2^52 µs (about 142 years), so state stays exact in a
/// double-precision number (Redis Lua) and nothing near `u64::MAX` is ever stored.
const MAX_SPAN_MICROS: u64 = 1 << 52;

/// How long a remote store keeps a concurrency slot its gateway stopped renewing, unless the
/// quota says otherwise ([`Quota::concurrency_with`]).
pub const DEFAULT_SLOT_TTL: Duration = Duration::from_secs(60);

/// The largest limit, capacity or burst.
pub const MAX_LIMIT: u64 = 1 << 40;

/// Which limiting algorithm a quota uses. Each has its own module in [`crate::algorithm`], whose
/// docs describe its trade-off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Algorithm {
    /// A bucket of `capacity` tokens refilled at a steady rate ([`crate::algorithm::token_bucket`]),
    /// computed as GCRA ([`crate::algorithm::gcra`]): the same behaviour, one stored number. A
    /// GCRA's rate and burst are a refill rate and a capacity, so [`Quota::token_bucket`] and
    /// [`Quota::gcra`] both build this.
    TokenBucket,
    /// `limit` per epoch-aligned window ([`crate::algorithm::fixed_window`]).
    FixedWindow,
    /// A rolling window estimated from two fixed windows ([`crate::algorithm::sliding_window_counter`]).
    SlidingWindowCounter,
    /// An exact rolling window from a log of arrivals ([`crate::algorithm::sliding_window_log`]).
    SlidingWindowLog,
    /// Pacing: requests are delayed onto a steady schedule ([`crate::algorithm::leaky_bucket`]).
    LeakyBucket,
    /// At most `limit` requests in flight at once ([`crate::algorithm::concurrency`]): a slot
    /// is taken before the request runs and given back when it ends.
    Concurrency,
}

impl Algorithm {
    /// A short, stable name (used in stored keys and logs).
    pub const fn name(self) -> &'static str {
        match self {
            Algorithm::TokenBucket => "token_bucket",
            Algorithm::FixedWindow => "fixed_window",
            Algorithm::SlidingWindowCounter => "sliding_window_counter",
            Algorithm::SlidingWindowLog => "sliding_window_log",
            Algorithm::LeakyBucket => "leaky_bucket",
            Algorithm::Concurrency => "concurrency",
        }
    }
}

/// An algorithm with its numbers: how much a caller may do.
///
/// A `Quota` can only be built through constructors that check their input, so a stored quota is
/// always usable: no zero rates, zero capacities, absurd periods or spans that would overflow.
///
/// ```
/// use std::time::Duration;
/// use tollgate_core::{Algorithm, Quota, Rate};
///
/// // Reading feeds: bursts of 50, then 10 a second.
/// let reads = Quota::token_bucket(50, Rate::per_second(10))?;
/// assert_eq!(reads.limit(), 50);
/// assert_eq!(reads.replenish_time(), Duration::from_secs(5));
///
/// // 400 follows a day, no more in any rolling day (approximately).
/// let follows = Quota::sliding_window_counter(400, Duration::from_secs(86_400))?;
/// assert_eq!(follows.algorithm(), Algorithm::SlidingWindowCounter);
/// # Ok::<(), tollgate_core::QuotaError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Quota {
    algorithm: Algorithm,
    limit: u64,
    /// Emission interval T (bucket, GCRA, pacing) or window length (windows), in µs.
    interval_micros: u64,
    /// Tolerance τ = limit × T (bucket, GCRA), maximum delay (pacing), or window length.
    span_micros: u64,
}

impl Quota {
    /// A token bucket of `capacity` tokens, refilled at `refill` (one token per emission
    /// interval). Capacity 5 refilled `Rate::every(6 s)` gives a burst of 5, then 10 a minute.
    pub fn token_bucket(capacity: u64, refill: Rate) -> Result<Quota, QuotaError> {
        Quota::bucket("capacity", capacity, refill)
    }

    /// GCRA at `rate` with a burst of `burst` requests: emission interval T = 1/rate,
    /// tolerance τ = burst × T. `Quota::gcra(Rate::per_second(10), 5)` has T = 100 ms, τ = 500 ms.
    ///
    /// The same limiter as a token bucket of capacity `burst` refilled at `rate`, and the same
    /// quota: its algorithm is [`Algorithm::TokenBucket`].
    ///
    /// ```
    /// use tollgate_core::{Algorithm, Quota, Rate};
    /// let gcra = Quota::gcra(Rate::per_second(10), 5)?;
    /// assert_eq!(gcra, Quota::token_bucket(5, Rate::per_second(10))?);
    /// assert_eq!(gcra.algorithm(), Algorithm::TokenBucket);
    /// # Ok::<(), tollgate_core::QuotaError>(())
    /// ```
    pub fn gcra(rate: Rate, burst: u64) -> Result<Quota, QuotaError> {
        Quota::bucket("burst", burst, rate)
    }

    /// At most `limit` per fixed window of `window`, windows aligned to the Unix epoch.
    pub fn fixed_window(limit: u64, window: Duration) -> Result<Quota, QuotaError> {
        Quota::windowed(Algorithm::FixedWindow, limit, window, MAX_LIMIT)
    }

    /// At most about `limit` in any rolling `window`, estimated from two epoch-aligned windows.
    pub fn sliding_window_counter(limit: u64, window: Duration) -> Result<Quota, QuotaError> {
        Quota::windowed(Algorithm::SlidingWindowCounter, limit, window, MAX_LIMIT)
    }

    /// Exactly at most `limit` in any rolling `window`; keeps one log entry per charge, so the
    /// limit is capped at [`MAX_LOG_LIMIT`].
    pub fn sliding_window_log(limit: u64, window: Duration) -> Result<Quota, QuotaError> {
        Quota::windowed(Algorithm::SlidingWindowLog, limit, window, MAX_LOG_LIMIT)
    }

    /// Pacing at `rate`: each request is scheduled one emission interval after the previous
    /// one and told how long to wait; a request that would wait longer than `max_delay` is
    /// refused.
    pub fn leaky_bucket(rate: Rate, max_delay: Duration) -> Result<Quota, QuotaError> {
        let interval = checked_interval(rate)?;
        let max_delay_micros = micros_ceil(max_delay);
        if max_delay > MAX_PERIOD {
            return Err(QuotaError::PeriodTooLong {
                what: "maximum delay",
                value: max_delay,
                max: MAX_PERIOD,
            });
        }
        Ok(Quota {
            algorithm: Algorithm::LeakyBucket,
            limit: max_delay_micros / interval + 1,
            interval_micros: interval,
            span_micros: max_delay_micros,
        })
    }

    /// At most `limit` requests of a caller in flight at once (a request takes its cost in
    /// slots): refusals ask the caller to retry after 1 s, and a remote store lets a slot go
    /// after [`DEFAULT_SLOT_TTL`] once the gateway holding it stops renewing it. See
    /// [`concurrency_with`](Self::concurrency_with) to choose both.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate_core::{Algorithm, Quota};
    ///
    /// let exports = Quota::concurrency(2)?;
    /// assert_eq!(exports.algorithm(), Algorithm::Concurrency);
    /// assert_eq!(exports.refusal_retry_after(), Some(Duration::from_secs(1)));
    /// assert_eq!(exports.slot_ttl(), Some(Duration::from_secs(60)));
    /// assert!(Quota::concurrency(0).is_err());
    /// # Ok::<(), tollgate_core::QuotaError>(())
    /// ```
    pub fn concurrency(limit: u64) -> Result<Quota, QuotaError> {
        Quota::concurrency_with(limit, Duration::from_secs(1), DEFAULT_SLOT_TTL)
    }

    /// [`concurrency`](Self::concurrency) with the wait a refusal announces (`Retry-After`:
    /// there is no refill time to compute one from) and how long a remote store keeps a slot
    /// its gateway stopped renewing (a gateway that died mid-request frees its slots within
    /// it). Both at most [`MAX_PERIOD`]; `slot_ttl` at least 1 s, since the gateway renews
    /// slots a few times within it. The limit is at most [`MAX_LOG_LIMIT`] (100,000): a
    /// remote store keeps one entry per slot held, as a sliding log keeps one per charge.
    pub fn concurrency_with(
        limit: u64,
        retry_after: Duration,
        slot_ttl: Duration,
    ) -> Result<Quota, QuotaError> {
        check_limit("limit", limit, MAX_LOG_LIMIT)?;
        let retry_after = checked_period("retry after", retry_after)?;
        if slot_ttl < Duration::from_secs(1) {
            return Err(QuotaError::PeriodTooShort {
                what: "slot ttl",
                value: slot_ttl,
                min: Duration::from_secs(1),
            });
        }
        let slot_ttl = checked_period("slot ttl", slot_ttl)?;
        Ok(Quota {
            algorithm: Algorithm::Concurrency,
            limit,
            interval_micros: retry_after,
            span_micros: slot_ttl,
        })
    }

    /// The wait a refused concurrency request is told (`Retry-After`). `None` for other
    /// algorithms, whose refusals compute their wait.
    pub fn refusal_retry_after(&self) -> Option<Duration> {
        (self.algorithm == Algorithm::Concurrency)
            .then(|| Duration::from_micros(self.interval_micros))
    }

    /// How long a remote store keeps a concurrency slot that its gateway stopped renewing.
    /// `None` for other algorithms.
    pub fn slot_ttl(&self) -> Option<Duration> {
        (self.algorithm == Algorithm::Concurrency).then(|| Duration::from_micros(self.span_micros))
    }

    /// A token bucket (GCRA) of `limit`, called `what` in errors ("capacity" or "burst").
    fn bucket(what: &'static str, limit: u64, rate: Rate) -> Result<Quota, QuotaError> {
        check_limit(what, limit, MAX_LIMIT)?;
        let interval = checked_interval(rate)?;
        let span = limit
            .checked_mul(interval)
            .filter(|span| *span <= MAX_SPAN_MICROS)
            .ok_or(QuotaError::TooLarge {
                what,
                value: limit,
                max: MAX_SPAN_MICROS / interval,
            })?;
        Ok(Quota {
            algorithm: Algorithm::TokenBucket,
            limit,
            interval_micros: interval,
            span_micros: span,
        })
    }

    fn windowed(
        algorithm: Algorithm,
        limit: u64,
        window: Duration,
        max_limit: u64,
    ) -> Result<Quota, QuotaError> {
        check_limit("limit", limit, max_limit)?;
        let window_micros = checked_period("window", window)?;
        Ok(Quota {
            algorithm,
            limit,
            interval_micros: window_micros,
            span_micros: window_micros,
        })
    }

    /// The algorithm.
    pub const fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The most a caller can spend at once: the capacity (token bucket), burst (GCRA), the
    /// window limit (windows), or how many requests can be scheduled ahead (pacing).
    pub const fn limit(&self) -> u64 {
        self.limit
    }

    /// The emission interval (token bucket, GCRA, pacing): the time one unit of cost takes to
    /// come back. `None` for windows.
    pub fn emission_interval(&self) -> Option<Duration> {
        self.is_scheduled()
            .then(|| Duration::from_micros(self.interval_micros))
    }

    /// The window length (window algorithms). `None` otherwise.
    pub fn window(&self) -> Option<Duration> {
        self.is_windowed()
            .then(|| Duration::from_micros(self.interval_micros))
    }

    /// The longest a pacing rule lets a request wait. `None` for other algorithms.
    pub fn max_delay(&self) -> Option<Duration> {
        (self.algorithm == Algorithm::LeakyBucket).then(|| Duration::from_micros(self.span_micros))
    }

    /// How long an exhausted caller takes to get the whole limit back: τ for buckets and GCRA,
    /// the window for windows (a sliding counter's old window fades over one more window),
    /// `limit` emission intervals for pacing, and for concurrency the slot ttl (slots come back
    /// as requests end; the ttl bounds how long a remote store keeps those of a gateway that
    /// died).
    pub fn replenish_time(&self) -> Duration {
        Duration::from_micros(match self.algorithm {
            Algorithm::LeakyBucket => self.limit.saturating_mul(self.interval_micros),
            _ => self.span_micros,
        })
    }

    /// Part `index` of `parts` equal shares of this quota, so the parts add up to it: the
    /// limit (capacity, burst or window limit) C becomes ⌊C/N⌋ or ⌈C/N⌉ — the first
    /// `C mod N` parts get the extra unit — and a bucket's rate becomes R/N (its emission
    /// interval N times longer); a window keeps its length. Used by split allowances and
    /// hot-key sub-buckets.
    ///
    /// An error when a part would be empty (C < N), the quota paces requests (a leaky bucket
    /// delays instead of refusing, so it cannot be shared out) or counts requests in flight (a
    /// slot must come back where it was taken).
    ///
    /// ```
    /// use tollgate_core::{Quota, Rate};
    /// let partner = Quota::token_bucket(10, Rate::per_second(200))?;
    /// let parts: Vec<u64> = (0..4).map(|i| partner.part(i, 4).unwrap().limit()).collect();
    /// assert_eq!(parts, [3, 3, 2, 2]);
    /// assert_eq!(partner.part(0, 4)?.interval_micros(), 4 * partner.interval_micros());
    /// assert!(partner.part(0, 11).is_err());
    /// # Ok::<(), tollgate_core::QuotaError>(())
    /// ```
    pub fn part(&self, index: u64, parts: u64) -> Result<Quota, QuotaError> {
        if parts == 0 {
            return Err(QuotaError::Zero { what: "parts" });
        }
        if self.algorithm == Algorithm::LeakyBucket {
            return Err(QuotaError::Unsplittable {
                reason: "a pacing rule delays instead of refusing, so it cannot be shared out",
            });
        }
        if self.algorithm == Algorithm::Concurrency {
            return Err(QuotaError::Unsplittable {
                reason: "a concurrency slot must come back where it was taken, so the limit is not shared out",
            });
        }
        if self.limit < parts {
            return Err(QuotaError::Unsplittable {
                reason: "the limit is smaller than the number of parts, so a part would be empty",
            });
        }
        let limit = self.limit / parts + u64::from(index % parts < self.limit % parts);
        if !self.is_scheduled() {
            return Ok(Quota { limit, ..*self });
        }
        let interval = self
            .interval_micros
            .checked_mul(parts)
            .filter(|interval| *interval <= MAX_SPAN_MICROS);
        // Checked for the largest part, so every part of one split is possible or none is.
        let largest = self.limit.div_ceil(parts);
        let span = interval
            .and_then(|interval| interval.checked_mul(largest))
            .filter(|span| *span <= MAX_SPAN_MICROS)
            .and(interval)
            .map(|interval| interval * limit);
        match (interval, span) {
            (Some(interval_micros), Some(span_micros)) => Ok(Quota {
                limit,
                interval_micros,
                span_micros,
                ..*self
            }),
            _ => Err(QuotaError::Unsplittable {
                reason: "each part's rate would be slower than tollgate can count",
            }),
        }
    }

    fn is_windowed(&self) -> bool {
        matches!(
            self.algorithm,
            Algorithm::FixedWindow | Algorithm::SlidingWindowCounter | Algorithm::SlidingWindowLog
        )
    }

    fn is_scheduled(&self) -> bool {
        matches!(
            self.algorithm,
            Algorithm::TokenBucket | Algorithm::LeakyBucket
        )
    }

    /// The algorithm's step in whole µs: the emission interval (token bucket, GCRA, pacing) or
    /// the window length (windows and logs). Remote stores send it to their server as is.
    ///
    /// ```
    /// use tollgate_core::{Quota, Rate};
    /// let quota = Quota::gcra(Rate::per_second(10), 5)?;
    /// assert_eq!(quota.interval_micros(), 100_000);
    /// assert_eq!(quota.span_micros(), 500_000);
    /// # Ok::<(), tollgate_core::QuotaError>(())
    /// ```
    pub const fn interval_micros(&self) -> u64 {
        self.interval_micros
    }

    /// The algorithm's reach in whole µs: the burst tolerance (token bucket, GCRA), the
    /// longest delay (pacing) or the window length; at most 2^52, exact in a double.
    pub const fn span_micros(&self) -> u64 {
        self.span_micros
    }
}

fn check_limit(what: &'static str, limit: u64, max: u64) -> Result<(), QuotaError> {
    if limit == 0 {
        return Err(QuotaError::Zero { what });
    }
    if limit > max {
        return Err(QuotaError::TooLarge {
            what,
            value: limit,
            max,
        });
    }
    Ok(())
}

fn checked_period(what: &'static str, period: Duration) -> Result<u64, QuotaError> {
    if period.is_zero() {
        return Err(QuotaError::ZeroPeriod {
            what,
            value: period,
        });
    }
    if period > MAX_PERIOD {
        return Err(QuotaError::PeriodTooLong {
            what,
            value: period,
            max: MAX_PERIOD,
        });
    }
    Ok(micros_ceil(period))
}

fn checked_interval(rate: Rate) -> Result<u64, QuotaError> {
    if rate.count() == 0 {
        return Err(QuotaError::Zero { what: "rate count" });
    }
    checked_period("rate period", rate.period())?;
    if rate.count() > rate.period_micros() {
        return Err(QuotaError::RateTooFast { rate });
    }
    rate.emission_interval_micros()
        .ok_or(QuotaError::Zero { what: "rate count" })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gcra_numbers_match_the_seed() {
        let quota = Quota::gcra(Rate::per_second(10), 5).unwrap();
        assert_eq!(quota.emission_interval(), Some(Duration::from_millis(100)));
        assert_eq!(quota.replenish_time(), Duration::from_millis(500));
    }

    #[test]
    fn gcra_builds_the_token_bucket_with_the_same_numbers() {
        for (rate, burst) in [
            (Rate::per_second(10), 5),
            (Rate::per_hour(1), 1),
            (Rate::per(3, Duration::from_millis(700)), 7),
            (Rate::per_day(1_000), MAX_LIMIT / 1_000_000),
        ] {
            let gcra = Quota::gcra(rate, burst);
            assert_eq!(
                gcra,
                Quota::token_bucket(burst, rate),
                "{rate:?}, burst {burst}"
            );
        }
        // Errors name the number as its constructor calls it.
        let zero_burst = Quota::gcra(Rate::per_second(1), 0).unwrap_err();
        assert_eq!(zero_burst, QuotaError::Zero { what: "burst" });
    }

    #[test]
    fn bad_values_are_named() {
        let zero_rate = Quota::gcra(Rate::per_second(0), 5).unwrap_err();
        assert_eq!(zero_rate, QuotaError::Zero { what: "rate count" });
        let zero_window = Quota::fixed_window(5, Duration::ZERO).unwrap_err();
        assert!(
            zero_window
                .to_string()
                .contains("window must be longer than zero")
        );
        let absurd = Quota::token_bucket(5, Rate::per(1, Duration::from_secs(10 * 365 * 86_400)));
        assert!(absurd.unwrap_err().to_string().contains("rate period"));
        let too_fast = Quota::token_bucket(5, Rate::per_second(2_000_000)).unwrap_err();
        assert!(matches!(too_fast, QuotaError::RateTooFast { .. }));
        let huge_burst = Quota::token_bucket(u64::MAX, Rate::per_second(1)).unwrap_err();
        assert!(huge_burst.to_string().contains(&u64::MAX.to_string()));
        let huge_log = Quota::sliding_window_log(MAX_LOG_LIMIT + 1, Duration::from_secs(1));
        assert!(huge_log.unwrap_err().is_out_of_range());
        let zero_capacity = Quota::token_bucket(0, Rate::per_second(1)).unwrap_err();
        assert_eq!(
            zero_capacity.to_string(),
            "capacity must be at least 1, got 0"
        );
    }

    #[test]
    fn parts_add_up_to_the_whole() {
        let bucket = Quota::token_bucket(10, Rate::per_second(3)).unwrap();
        let parts: Vec<Quota> = (0..3).map(|i| bucket.part(i, 3).unwrap()).collect();
        assert_eq!(parts.iter().map(Quota::limit).sum::<u64>(), 10);
        let rate: f64 = parts.iter().map(|p| 1e6 / p.interval_micros() as f64).sum();
        // The whole quota's interval is already 333,334 µs (rounded up to whole µs).
        let whole = 1e6 / bucket.interval_micros() as f64;
        assert!((rate - whole).abs() < 1e-9, "{rate} against {whole}");
        assert!(
            parts
                .iter()
                .all(|p| p.span_micros() == p.limit() * p.interval_micros())
        );
        let window = Quota::fixed_window(7, Duration::from_secs(60)).unwrap();
        let limits: Vec<u64> = (0..4).map(|i| window.part(i, 4).unwrap().limit()).collect();
        assert_eq!(limits, [2, 2, 2, 1]);
        assert_eq!(window.part(3, 4).unwrap().window(), window.window());
        assert!(window.part(0, 8).is_err());
        assert!(window.part(0, 0).is_err());
        let pacing = Quota::leaky_bucket(Rate::per_second(10), Duration::from_secs(1)).unwrap();
        assert!(pacing.part(0, 2).is_err());
    }

    #[test]
    fn pacing_limit_counts_the_schedulable_slots() {
        let quota = Quota::leaky_bucket(Rate::per_second(10), Duration::from_millis(250)).unwrap();
        assert_eq!(quota.limit(), 3);
        assert_eq!(quota.max_delay(), Some(Duration::from_millis(250)));
    }
}
