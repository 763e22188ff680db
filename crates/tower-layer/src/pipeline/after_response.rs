//! What the response decides of a request's charges: its head says which charges that count
//! only for some responses are refunded, and what settled rules' actual costs are; its body
//! keeps the concurrency slots and the estimates still to settle until it ends.

use std::sync::Arc;

use http::response::Parts;
use smallvec::SmallVec;
use tollgate_core::{DynStore, Receipt};

use crate::pipeline::charges::Charges;
use crate::pipeline::cut::StreamCut;
use crate::pipeline::held::HeldSlots;
use crate::pipeline::refund::refund_all;
use crate::pipeline::settling::Settling;
use crate::rules::rule::CountWhen;

/// Charges to take back unless the response says they count, slots to give back when the
/// response body ends, and estimates to settle then (when this, or what it becomes, is dropped
/// first: then).
pub(crate) struct AfterResponse {
    charges: SmallVec<[(Receipt, CountWhen); 1]>,
    until_body_ends: UntilBodyEnds,
    /// The settled rules' tests of whether a response counts, in the order of their estimates.
    settled_counts: SmallVec<[Option<CountWhen>; 1]>,
    store: DynStore,
}

/// What a response body keeps until it ends (or is dropped): the request's concurrency slots,
/// and its estimates still to settle.
#[derive(Default)]
pub(crate) struct UntilBodyEnds {
    held: Option<HeldSlots>,
    settling: Option<Settling>,
    /// Ends the body early when an inbound message is refused (per-message rules).
    pub(crate) cut: Option<Arc<StreamCut>>,
}

impl UntilBodyEnds {
    /// Whether there is nothing to keep.
    pub(crate) fn is_empty(&self) -> bool {
        self.held.is_none() && self.settling.is_none() && self.cut.is_none()
    }
}

impl AfterResponse {
    /// What `charges` leave to the response, given back to `store`; the slots are held until
    /// its body ends.
    pub(crate) fn new(charges: Charges, store: DynStore) -> Self {
        let held = (!charges.held.is_empty()).then(|| HeldSlots::new(charges.held, store.clone()));
        let any_settled = !charges.settled.is_empty();
        let (settled, settled_counts) = charges.settled.into_iter().unzip();
        let settling = any_settled.then(|| Settling::new(settled, charges.meter, store.clone()));
        AfterResponse {
            charges: charges.conditional,
            until_body_ends: UntilBodyEnds {
                held,
                settling,
                cut: charges.cut,
            },
            settled_counts,
            store,
        }
    }

    /// Refunds the charges whose rule says the response (its head: `response`) does not
    /// count, reads what the head says of settled rules' actual costs, and answers what the
    /// response body keeps until it ends.
    pub(crate) fn on_head(self, response: &mut Parts) -> UntilBodyEnds {
        let status = response.status;
        let receipts: Vec<Receipt> = self
            .charges
            .into_iter()
            .filter(|(_, counts)| !counts(status))
            .map(|(receipt, _)| receipt)
            .collect();
        if !receipts.is_empty() {
            refund_all(self.store, receipts);
        }
        let mut until_body_ends = self.until_body_ends;
        // A trailers-only response (the handler answered with an error status) ends with its
        // head: nothing to cut later. If a message was refused before it, the refusal's status
        // is the answer, whatever status the handler made of it.
        if response.headers.contains_key("grpc-status")
            && let Some(cut) = until_body_ends.cut.take()
            && let Some(trailers) = cut.take_cut()
        {
            for name in ["grpc-status", "grpc-message", "grpc-status-details-bin"] {
                response.headers.remove(name);
            }
            for (name, value) in &trailers {
                response.headers.insert(name, value.clone());
            }
        }
        if let Some(settling) = &mut until_body_ends.settling {
            let counts = self.settled_counts.iter();
            settling.read_head(
                response,
                counts.map(|counts| counts.as_ref().is_none_or(|counts| counts(status))),
            );
        }
        until_body_ends
    }
}
