//! Why the primary did not answer a call.

use tollgate_core::StoreError;

/// Why a call is answered by the fallback: the primary failed (or timed out), or the circuit
/// breaker kept the call from it. The breaker's error is built only when a rule that fails
/// closed needs it, so falling back open or locally allocates nothing for it.
#[derive(Debug)]
pub(super) enum Outage {
    /// The primary answered with this error, or did not answer in time.
    Failed(StoreError),
    /// The breaker is open; the primary was not called.
    BreakerOpen,
}

impl Outage {
    /// The error to hand to the caller.
    pub(super) fn into_error(self) -> StoreError {
        match self {
            Outage::Failed(error) => error,
            Outage::BreakerOpen => StoreError::unavailable(
                "primary store not called: its circuit breaker is open after repeated failures",
            ),
        }
    }
}
