//! What a request costs a rule: a fixed number of units, a function of the request, or a
//! header's value (for a rule settled after the response, an estimate: see actual_cost.rs).

use std::sync::Arc;

use http::HeaderName;
use http::request::Parts;

use crate::rules::actual_cost::units_in;

/// What a request costs.
#[derive(Clone)]
pub(crate) enum Cost {
    Fixed(u64),
    Computed(Arc<dyn Fn(&Parts) -> u64 + Send + Sync>),
}

impl Cost {
    /// The integer in the request's header `name`, else `default`; at least 1 (the caller sets
    /// the header, and a request can never make itself free).
    pub(crate) fn from_header(name: HeaderName, default: u64) -> Cost {
        Cost::Computed(Arc::new(move |request: &Parts| {
            request
                .headers
                .get(&name)
                .and_then(units_in)
                .unwrap_or(default)
                .max(1)
        }))
    }

    /// What `request` costs.
    pub(crate) fn of(&self, request: &Parts) -> u64 {
        match self {
            Cost::Fixed(cost) => *cost,
            Cost::Computed(cost) => cost(request),
        }
    }
}
