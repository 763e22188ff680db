//! What a request's charges leave to its response: receipts to refund if the response says
//! they do not count, concurrency slots held until its body ends, estimates to settle with the
//! actual cost then, and the response stream a per-message rule may cut.

use std::sync::Arc;

use smallvec::SmallVec;
use tollgate_core::Receipt;

use crate::pipeline::cut::StreamCut;
use crate::pipeline::held::Hold;
use crate::pipeline::settling::Settled;
use crate::rules::actual_cost::CostMeter;
use crate::rules::rule::CountWhen;

/// What a request's charges leave to its response: charges that count only for some
/// responses, with the rule's test; concurrency slots, given back when the response body ends;
/// and estimates settled with the actual cost then (read from `meter`, for costs the handler
/// reports).
#[derive(Default)]
pub(crate) struct Charges {
    pub(crate) conditional: SmallVec<[(Receipt, CountWhen); 1]>,
    pub(crate) held: SmallVec<[Hold; 1]>,
    pub(crate) settled: SmallVec<[(Settled, Option<CountWhen>); 1]>,
    pub(crate) meter: Option<CostMeter>,
    /// The call's response stream, ended early if an inbound message is refused (per-message
    /// rules).
    pub(crate) cut: Option<Arc<StreamCut>>,
}

impl Charges {
    /// Whether the response has nothing to do.
    pub(crate) fn is_empty(&self) -> bool {
        self.conditional.is_empty()
            && self.held.is_empty()
            && self.settled.is_empty()
            && self.cut.is_none()
    }
}
