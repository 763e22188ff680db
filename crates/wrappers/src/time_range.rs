//! A wrapper's own clock past [`Timestamp::MAX_SUPPORTED`](tollgate_core::Timestamp): what it
//! keeps in its own memory (a fallback's local count, a split's part, a synced copy, the time of
//! a push) is never written at a time no store can represent. Such a call answers the error the
//! stores answer, before anything is read or changed, and the wrapper answers as before once its
//! clock is back in range.

use tollgate_core::{StoreError, Timestamp};

/// `now`, or the error naming the supported range when it is past it.
pub(crate) fn in_range(now: Timestamp) -> Result<Timestamp, StoreError> {
    if now > Timestamp::MAX_SUPPORTED {
        return Err(StoreError::time_out_of_range(now));
    }
    Ok(now)
}
