//! Typed errors. A refusal is never an error, and a store error is never a refusal.

use std::time::Duration;

use crate::{Rate, Timestamp};

/// A quota that cannot be built, naming the bad value.
///
/// ```
/// use std::time::Duration;
/// use tollgate_core::{Quota, Rate};
///
/// let err = Quota::token_bucket(0, Rate::per_second(1)).unwrap_err();
/// assert!(err.is_zero());
/// assert_eq!(err.to_string(), "capacity must be at least 1, got 0");
///
/// let err = Quota::fixed_window(10, Duration::from_secs(400 * 86_400)).unwrap_err();
/// assert!(err.is_out_of_range());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QuotaError {
    /// A count, capacity, burst or limit of zero.
    #[error("{what} must be at least 1, got 0")]
    Zero {
        /// Which value was zero ("capacity", "limit", "rate count", ...).
        what: &'static str,
    },
    /// A period or window of zero length.
    #[error("{what} must be longer than zero, got {value:?}")]
    ZeroPeriod {
        /// Which duration was zero.
        what: &'static str,
        /// The value given.
        value: Duration,
    },
    /// A period, window or delay longer than tollgate supports.
    #[error("{what} of {value:?} is longer than the supported maximum of {max:?}")]
    PeriodTooLong {
        /// Which duration was too long.
        what: &'static str,
        /// The value given.
        value: Duration,
        /// The largest accepted value.
        max: Duration,
    },
    /// A duration shorter than its use allows (a concurrency slot's time to live).
    #[error("{what} of {value:?} is shorter than the supported minimum of {min:?}")]
    PeriodTooShort {
        /// Which duration was too short.
        what: &'static str,
        /// The value given.
        value: Duration,
        /// The smallest accepted value.
        min: Duration,
    },
    /// A rate faster than one event per microsecond (per key).
    #[error("rate {rate} is faster than one per microsecond, the finest tollgate counts")]
    RateTooFast {
        /// The rate given.
        rate: Rate,
    },
    /// A count, capacity, burst or limit larger than tollgate supports.
    #[error("{what} of {value} is larger than the supported maximum of {max}")]
    TooLarge {
        /// Which value was too large.
        what: &'static str,
        /// The value given.
        value: u64,
        /// The largest accepted value.
        max: u64,
    },
    /// A quota that cannot be shared out in parts (split allowances, sub-buckets).
    #[error("the quota cannot be split: {reason}")]
    Unsplittable {
        /// Why not.
        reason: &'static str,
    },
}

impl QuotaError {
    /// A zero count or zero period.
    pub fn is_zero(&self) -> bool {
        matches!(
            self,
            QuotaError::Zero { .. } | QuotaError::ZeroPeriod { .. }
        )
    }

    /// A value outside what tollgate supports (too long, too short, too large or too fast).
    pub fn is_out_of_range(&self) -> bool {
        matches!(
            self,
            QuotaError::PeriodTooLong { .. }
                | QuotaError::PeriodTooShort { .. }
                | QuotaError::RateTooFast { .. }
                | QuotaError::TooLarge { .. }
        )
    }
}

/// A rule id that cannot be used, with the reason.
///
/// ```
/// use tollgate_core::RuleId;
/// let err = RuleId::new("login per account").unwrap_err();
/// assert!(err.to_string().contains("' '"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RuleIdError {
    /// The id is empty.
    #[error("a rule id must not be empty")]
    Empty,
    /// The id is longer than [`RuleId::MAX_LEN`](crate::RuleId::MAX_LEN).
    #[error("rule id is {len} bytes long; the maximum is {max}")]
    TooLong {
        /// Its length in bytes.
        len: usize,
        /// The maximum.
        max: usize,
    },
    /// The process already made [`RuleId::MAX_DISTINCT`](crate::RuleId::MAX_DISTINCT) distinct ids.
    #[error(
        "more than {max} distinct rule ids in one process; rule ids name policies, not callers"
    )]
    TooMany {
        /// The maximum.
        max: usize,
    },
    /// The id contains a character outside `A-Z a-z 0-9 _ - .`.
    #[error("rule id contains {found:?}; only A-Z, a-z, 0-9, '_', '-' and '.' are allowed")]
    InvalidCharacter {
        /// The first character that is not allowed.
        found: char,
    },
    /// The id ends in a suffix reserved for state a rule keeps beside its own (escalation's
    /// `.strikes` and `.block`): a rule of that name would share another rule's strikes or
    /// block. Such ids are made only by [`RuleId::derived`](crate::RuleId::derived).
    #[error("rule ids ending in {suffix:?} are reserved for escalation state; choose another name")]
    Reserved {
        /// The reserved suffix.
        suffix: &'static str,
    },
}

/// A store could not answer. Never a refusal: the rule's store-failure policy decides what
/// happens next.
///
/// ```
/// use tollgate_core::StoreError;
/// let err = StoreError::unavailable("connection refused");
/// assert!(err.is_unavailable());
/// assert!(!err.is_timeout());
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[error("{kind}: {detail}")]
pub struct StoreError {
    kind: StoreErrorKind,
    detail: String,
}

/// What went wrong in a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreErrorKind {
    /// The store did not answer in time.
    #[error("store timed out")]
    Timeout,
    /// The store cannot be reached or refused the operation.
    #[error("store unavailable")]
    Unavailable,
    /// The store answered something this client does not understand.
    #[error("unexpected answer from store")]
    Protocol,
    /// The store ran out of room for something it must keep (for example, distinct rule ids).
    #[error("store capacity exhausted")]
    Capacity,
    /// The store's clock reads a time past [`Timestamp::MAX_SUPPORTED`] (2^52 − 1 µs since the
    /// Unix epoch, in the year 2112), which no store can represent (a misread clock, a test
    /// clock): nothing was read or changed, and the same call answers normally once the clock is
    /// back in range. The stores that wrap stores (tollgate-wrappers) answer it too when their
    /// own clock reads past the range, before they count anything in their own memory; a
    /// `FallbackStore` whose primary alone answers it (a remote store on its own clock) answers
    /// by each rule's failure policy, as for any error of its primary.
    #[error("time outside the supported range")]
    TimeOutOfRange,
}

impl StoreError {
    /// A new error of `kind` with a human-readable detail.
    pub fn new(kind: StoreErrorKind, detail: impl Into<String>) -> Self {
        StoreError {
            kind,
            detail: detail.into(),
        }
    }

    /// The store did not answer in time.
    pub fn timeout(detail: impl Into<String>) -> Self {
        StoreError::new(StoreErrorKind::Timeout, detail)
    }

    /// The store cannot be reached.
    pub fn unavailable(detail: impl Into<String>) -> Self {
        StoreError::new(StoreErrorKind::Unavailable, detail)
    }

    /// The store's clock read `now`, past [`Timestamp::MAX_SUPPORTED`]: the detail names the
    /// supported range, and says that nothing was read or changed.
    ///
    /// ```
    /// use tollgate_core::{StoreError, Timestamp};
    /// let late = Timestamp::MAX_SUPPORTED.saturating_add_micros(1);
    /// let error = StoreError::time_out_of_range(late);
    /// assert!(error.is_time_out_of_range());
    /// assert!(error.to_string().contains("4503599627370495"));
    /// ```
    #[cold]
    pub fn time_out_of_range(now: Timestamp) -> Self {
        StoreError::new(
            StoreErrorKind::TimeOutOfRange,
            format!(
                "the clock reads {} µs since the Unix epoch; stores support times from 0 to {} µs \
                 (Timestamp::MAX_SUPPORTED, 2^52 − 1 µs, in the year 2112); nothing was read or \
                 changed",
                now.as_micros(),
                Timestamp::MAX_SUPPORTED.as_micros()
            ),
        )
    }

    /// What went wrong.
    pub fn kind(&self) -> StoreErrorKind {
        self.kind
    }

    /// The human-readable detail.
    pub fn detail(&self) -> &str {
        &self.detail
    }

    /// The store did not answer in time.
    pub fn is_timeout(&self) -> bool {
        self.kind == StoreErrorKind::Timeout
    }

    /// The store cannot be reached.
    pub fn is_unavailable(&self) -> bool {
        self.kind == StoreErrorKind::Unavailable
    }

    /// The store answered something unexpected.
    pub fn is_protocol(&self) -> bool {
        self.kind == StoreErrorKind::Protocol
    }

    /// The store ran out of room.
    pub fn is_capacity(&self) -> bool {
        self.kind == StoreErrorKind::Capacity
    }

    /// The store's clock read a time past [`Timestamp::MAX_SUPPORTED`]; nothing was changed.
    pub fn is_time_out_of_range(&self) -> bool {
        self.kind == StoreErrorKind::TimeOutOfRange
    }
}
