//! One call to the primary: past the circuit breaker, within the timeout, its outcome recorded.

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use super::FallbackStore;
use super::breaker::Admission;
use super::nodes::Picked;
use super::outage::Outage;
use tollgate_core::{Clock, Store, StoreError};

impl<P: Store, C: Clock> FallbackStore<P, C> {
    /// Sends `call` to the primary if the breaker lets it through, waits at most the timeout,
    /// and records the outcome. `op` names the call in logs.
    pub(super) async fn call_primary<T, F>(
        &self,
        picked: &Picked,
        op: &'static str,
        call: impl FnOnce() -> F,
    ) -> Result<T, Outage>
    where
        F: Future<Output = Result<T, StoreError>>,
    {
        let admission = picked.breaker.admit(self.local.clock());
        if admission == Admission::Skip {
            self.counters.short_circuited.add_one();
            return Err(Outage::BreakerOpen);
        }
        #[cfg(feature = "metrics")]
        let started = self.metrics.as_ref().map(|_| std::time::Instant::now());
        // The primary may read when its caller stops waiting (`store_kit::call_deadline`),
        // so a call that runs late charges nothing.
        let deadline = std::time::Instant::now() + self.timeout;
        let call = tollgate_core::store_kit::within_call_deadline(deadline, call());
        let result = within(self.timeout, op, call).await;
        #[cfg(feature = "metrics")]
        if let (Some(metrics), Some(started)) = (&self.metrics, started) {
            metrics.seconds.record(started.elapsed().as_secs_f64());
        }
        self.settle(picked, op, admission, result)
    }

    /// Records what the primary answered to a call the breaker admitted.
    pub(super) fn settle<T>(
        &self,
        picked: &Picked,
        op: &'static str,
        admission: Admission,
        result: Result<T, StoreError>,
    ) -> Result<T, Outage> {
        match result {
            Ok(answer) => {
                let transition = picked.breaker.succeeded(admission);
                self.report_success(picked, transition);
                self.alarm.recovered(self.local.clock().now());
                Ok(answer)
            }
            Err(error) => {
                self.counters.primary_failures.add_one();
                #[cfg(feature = "metrics")]
                if let Some(metrics) = &self.metrics {
                    metrics.error(error.kind());
                }
                if error.is_timeout() {
                    self.counters.timeouts.add_one();
                }
                let transition = picked.breaker.failed(admission, self.local.clock());
                self.report_failure(picked, op, &error, transition);
                Err(Outage::Failed(error))
            }
        }
    }
}

/// `call`'s answer, or a timeout error once `timeout` has passed.
///
/// An answer that is ready at once (an in-memory or leased primary, a cached refusal) needs no
/// timer, so the call is polled once before one is set.
async fn within<T>(
    timeout: Duration,
    op: &'static str,
    call: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    let mut call = pin!(call);
    if let Poll::Ready(answer) = poll_fn(|cx| Poll::Ready(call.as_mut().poll(cx))).await {
        return answer;
    }
    tokio::time::timeout(timeout, call)
        .await
        .unwrap_or_else(|_| {
            Err(StoreError::timeout(format!(
                "primary store did not answer {op} within {timeout:?}"
            )))
        })
}
