//! When the caller of a store call stops waiting for it: set by
//! `FallbackStore` around each call to its primary, read by a store whose
//! call may still run after its caller gave up (the Redis store passes it to its script, which
//! then charges nothing if it starts too late: a caller answered by its failure policy is never
//! charged a second time when a stalled server wakes up).

use std::future::Future;
use std::time::Instant;

tokio::task_local! {
    static CALL_DEADLINE: Instant;
}

/// The deadline of the store call being made, when the wrapper around the store set one.
pub(crate) fn current() -> Option<Instant> {
    CALL_DEADLINE.try_with(|deadline| *deadline).ok()
}

/// `call`, made under `deadline` (or the deadline already set around it, if earlier).
pub(crate) fn within<F: Future>(deadline: Instant, call: F) -> impl Future<Output = F::Output> {
    let deadline = current().map_or(deadline, |outer| outer.min(deadline));
    CALL_DEADLINE.scope(deadline, call)
}
