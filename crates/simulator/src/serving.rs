//! The service's workers, for scenarios whose requests overlap ([`Service`]): each admitted
//! request waits for a free worker (first come, first served), works for its service time, and
//! keeps its response — with any concurrency slot the layer holds for it — until then.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use axum::body::Body;
use axum::http::Response;

use crate::Service;
use crate::visit::Call;

/// The workers and the responses still being worked on.
pub(crate) struct Serving {
    service: Service,
    /// When each worker is next free, µs since the scenario started.
    free_at: BinaryHeap<Reverse<u64>>,
    /// Responses whose work is not done yet, soonest done first.
    working: BinaryHeap<Working>,
    admitted: u64,
}

/// A response kept until its work is done (dropping it ends it: the layer gives back the
/// request's slots).
struct Working {
    done: u64,
    order: u64,
    _response: Response<Body>,
}

impl Serving {
    pub(crate) fn new(service: Service) -> Self {
        Serving {
            service,
            free_at: (0..service.workers.max(1)).map(|_| Reverse(0)).collect(),
            working: BinaryHeap::new(),
            admitted: 0,
        }
    }

    /// Ends every response whose work is done by `now`.
    pub(crate) fn end_until(&mut self, now: u64) {
        while self
            .working
            .peek()
            .is_some_and(|working| working.done <= now)
        {
            self.working.pop();
        }
    }

    /// A request admitted at `at` asking for `call`, answered `response`: it waits for the
    /// first free worker, which works on it for its service time; the response is kept until
    /// then. Answers its latency, µs (waiting and work).
    pub(crate) fn serve(&mut self, at: u64, call: &Call, response: Response<Body>) -> u64 {
        let free = self.free_at.pop().map_or(0, |Reverse(free)| free);
        let done = free.max(at).saturating_add(self.service.work(call));
        self.free_at.push(Reverse(done));
        self.admitted += 1;
        self.working.push(Working {
            done,
            order: self.admitted,
            _response: response,
        });
        done - at
    }
}

impl PartialEq for Working {
    fn eq(&self, other: &Self) -> bool {
        (self.done, self.order) == (other.done, other.order)
    }
}

impl Eq for Working {}

impl PartialOrd for Working {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Working {
    /// Reversed: the heap's greatest is the soonest done.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.done, other.order).cmp(&(self.done, self.order))
    }
}
