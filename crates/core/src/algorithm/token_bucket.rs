//! Token bucket: a burst up to the capacity, then a steady refill rate.
//!
//! The bucket holds at most B tokens and gains one every emission interval T (a refill rate of
//! R = 1/T). Each request takes `cost` tokens or is refused. A caller can burst B requests after
//! being quiet, but can never average more than R: in any span t, at most B + R × t pass. That
//! matches real clients (an app opening fires a burst, then goes quiet), which is why it is the
//! usual default for APIs.
//!
//! **Computed as GCRA.** The textbook form stores two numbers (tokens, last refill time); tollgate
//! stores one, the [GCRA](super::gcra) theoretical arrival time, with τ = B × T. The two are the
//! same limiter — the property tests check every decision against the two-number form — and
//! the remaining tokens at any moment are `(τ − max(0, tat − now)) / T`, see [`tokens`].
//!
//! **Trade-off.** Bigger buckets feel friendlier to real people and give attackers more per burst.
//!
//! ```
//! use std::time::Duration;
//! use tollgate_core::algorithm::{gcra_state::GcraState, token_bucket, AlgorithmState};
//! use tollgate_core::{Quota, Rate, Timestamp};
//!
//! // 5 tokens, one back every 6 seconds: a burst of 5, then 10 a minute.
//! let quota = Quota::token_bucket(5, Rate::every(Duration::from_secs(6)))?;
//! let mut state = GcraState::default();
//! let now = Timestamp::from_secs(60);
//! assert_eq!(token_bucket::tokens(&state, &quota, now), 5);
//! state.check(&quota, now, 2, now);
//! assert_eq!(token_bucket::tokens(&state, &quota, now), 3);
//! # Ok::<(), tollgate_core::QuotaError>(())
//! ```

use super::gcra_state::GcraState;
use crate::{Quota, Timestamp};

/// Whole tokens in the bucket at `now`.
pub fn tokens(state: &GcraState, quota: &Quota, now: Timestamp) -> u64 {
    quota
        .span_micros()
        .saturating_sub(state.backlog(quota, now))
        / quota.interval_micros()
}
