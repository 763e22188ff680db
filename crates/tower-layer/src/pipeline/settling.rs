//! Settling the estimates of rules whose cost is known only after the response: the actual
//! cost is read from the response's head (a header, an extension, a function) or from the
//! request's [`CostMeter`], and settled when the response body ends or is dropped.

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use http::response::Parts;
use smallvec::SmallVec;
use tollgate_core::{DynStore, Estimate};

use crate::observe::notices::RuleNotices;
use crate::rules::actual_cost::{CostMeter, SettleFrom};

/// One settled rule's part of a request: its estimate, where its actual cost comes from, what
/// the response's head said of it, and the rule's notices (to say once that nothing was
/// reported).
pub(crate) struct Settled {
    pub(crate) estimate: Estimate,
    pub(crate) from: SettleFrom,
    pub(crate) notices: Arc<RuleNotices>,
    /// What the response's head said (`Some(0)` when the rule says it does not count).
    pub(crate) actual: Option<u64>,
}

/// The estimates one request settles when its response body ends; dropping it settles them.
pub(crate) struct Settling {
    settled: SmallVec<[Settled; 1]>,
    meter: Option<CostMeter>,
    store: DynStore,
}

impl Settling {
    /// `settled` estimates to settle with `store`, reading reported costs from `meter`.
    pub(crate) fn new(
        settled: SmallVec<[Settled; 1]>,
        meter: Option<CostMeter>,
        store: DynStore,
    ) -> Self {
        Settling {
            settled,
            meter,
            store,
        }
    }

    /// Reads what the response's head says of each actual cost; `counts` says, estimate by
    /// estimate, whether the response counts for its rule (one that does not settles at 0).
    pub(crate) fn read_head(&mut self, response: &Parts, counts: impl Iterator<Item = bool>) {
        for (settled, counts) in self.settled.iter_mut().zip(counts) {
            settled.actual = if counts {
                settled.from.read(response)
            } else {
                Some(0)
            };
        }
    }
}

impl Drop for Settling {
    fn drop(&mut self) {
        let metered = self.meter.as_ref().and_then(CostMeter::get);
        let mut work = Vec::with_capacity(self.settled.len());
        for settled in self.settled.drain(..) {
            let reported = settled.from.is_reported().then_some(metered).flatten();
            match settled.actual.or(reported) {
                Some(actual) => work.push((settled.estimate, actual)),
                None => settled.notices.unsettled(settled.estimate.rule()),
            }
        }
        if !work.is_empty() {
            settle_all(self.store.clone(), work);
        }
    }
}

/// Settles every estimate with `store`: at once when the store answers at once (in memory),
/// else in a spawned task.
fn settle_all(store: DynStore, work: Vec<(Estimate, u64)>) {
    let settle = async move {
        for (estimate, actual) in work {
            let rule = estimate.rule().clone();
            if let Err(error) = estimate.settle(&store, actual).await {
                tracing::warn!(
                    target: "tollgate::store",
                    rule = %rule,
                    %error,
                    "could not settle a request's actual cost; the estimate stands"
                );
            }
        }
    };
    let mut settle = Box::pin(settle);
    if let Poll::Ready(()) = settle
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        return;
    }
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            runtime.spawn(settle);
        }
        Err(_) => tracing::warn!(
            target: "tollgate::store",
            "no tokio runtime to settle a request's actual cost on; the estimate stands"
        ),
    }
}
