//! Where a rule whose cost is known only after the response reads that cost: a response
//! header, what the handler reported, or a function of the response.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use http::HeaderName;
use http::response::Parts;

/// Where a settled rule reads a request's actual cost (see [`Rule::settle`](crate::Rule::settle)).
///
/// The rule's cost ([`Rule::cost`](crate::Rule::cost), [`Rule::cost_fn`](crate::Rule::cost_fn))
/// is the **estimate** taken up front; the actual cost is read here and settled when the
/// response body has been sent to its end (or dropped: a client that went away pays for what
/// was streamed until then). A response that reports no actual cost (no header, a value that
/// is not an integer, nothing reported) keeps the estimate, and the rule says so once at
/// `warn`.
///
/// ```
/// use http::HeaderName;
/// use tollgate_tower::SettleFrom;
///
/// let from_header = SettleFrom::header(HeaderName::from_static("x-tokens-used"));
/// let from_handler = SettleFrom::reported();
/// let from_status = SettleFrom::function(|response| response.status.is_success().then_some(1));
/// # let _ = (from_header, from_handler, from_status);
/// ```
#[derive(Clone)]
pub struct SettleFrom(Source);

#[derive(Clone)]
enum Source {
    Header(HeaderName),
    Reported,
    Function(ReadCost),
}

/// A function reading the actual cost from a response's head.
type ReadCost = Arc<dyn Fn(&Parts) -> Option<u64> + Send + Sync>;

impl SettleFrom {
    /// The response header `name`, a decimal integer (such as `x-tokens-used: 912`; a number
    /// past `u64::MAX` counts as `u64::MAX`, and a sign, a fraction or text as nothing
    /// reported).
    pub fn header(name: HeaderName) -> Self {
        SettleFrom(Source::Header(name))
    }

    /// What the handler reported: an [`ActualCost`] extension on its response, else what it
    /// added to the request's [`CostMeter`] (the layer puts one in every request of a rule
    /// settled this way; a streamed body can keep adding to it until it ends).
    pub fn reported() -> Self {
        SettleFrom(Source::Reported)
    }

    /// What `read` says of the response's head (`None`: nothing reported).
    pub fn function(read: impl Fn(&Parts) -> Option<u64> + Send + Sync + 'static) -> Self {
        SettleFrom(Source::Function(Arc::new(read)))
    }

    /// Whether the handler reports the cost through a [`CostMeter`].
    pub(crate) fn is_reported(&self) -> bool {
        matches!(self.0, Source::Reported)
    }

    /// The actual cost, as far as the response's head says: `None` when it does not (a
    /// reported cost may still come from the meter when the body ends).
    pub(crate) fn read(&self, response: &Parts) -> Option<u64> {
        match &self.0 {
            Source::Header(name) => units_in(response.headers.get(name)?),
            Source::Reported => response
                .extensions
                .get::<ActualCost>()
                .map(|actual| actual.0),
            Source::Function(read) => read(response),
        }
    }
}

/// A header value of units: decimal digits, surrounding spaces allowed, saturating at
/// `u64::MAX` (a larger number is not a smaller cost); anything else (a sign, a fraction, text)
/// is no value.
pub(crate) fn units_in(value: &http::HeaderValue) -> Option<u64> {
    let text = value.to_str().ok()?.trim();
    if text.is_empty() || !text.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    Some(text.parse().unwrap_or(u64::MAX))
}

impl fmt::Debug for SettleFrom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Source::Header(name) => write!(f, "SettleFrom::header({name})"),
            Source::Reported => f.write_str("SettleFrom::reported()"),
            Source::Function(_) => f.write_str("SettleFrom::function(..)"),
        }
    }
}

/// A request's actual cost, put on the response by the handler as an extension for rules
/// settled from [`SettleFrom::reported`].
///
/// ```
/// use axum::Extension;
/// use tollgate_tower::ActualCost;
///
/// async fn complete() -> (Extension<ActualCost>, &'static str) {
///     (Extension(ActualCost(912)), "...the model's answer...")
/// }
/// # let _ = complete;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActualCost(pub u64);

/// A running count of a request's actual cost, for a handler whose cost grows while it streams
/// (rows scanned, bytes sent): the layer puts one in the request's extensions for rules settled
/// from [`SettleFrom::reported`], and reads it when the response body ends. Clones share one
/// count.
///
/// ```
/// use axum::Extension;
/// use tollgate_tower::CostMeter;
///
/// async fn export(Extension(meter): Extension<CostMeter>) -> String {
///     let rows = vec!["a", "b", "c"];
///     meter.add(rows.len() as u64);
///     rows.join("\n")
/// }
/// # let _ = export;
/// ```
#[derive(Debug, Clone)]
pub struct CostMeter(Arc<AtomicU64>);

/// The meter's value before anything was reported.
const UNREPORTED: u64 = u64::MAX;

impl Default for CostMeter {
    fn default() -> Self {
        CostMeter::new()
    }
}

impl CostMeter {
    /// A meter with nothing reported.
    pub fn new() -> Self {
        CostMeter(Arc::new(AtomicU64::new(UNREPORTED)))
    }

    /// Adds `units` to the cost (saturating just below `u64::MAX`).
    pub fn add(&self, units: u64) {
        let _ = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
                let base = if now == UNREPORTED { 0 } else { now };
                Some(base.saturating_add(units).min(UNREPORTED - 1))
            });
    }

    /// Sets the cost to `units`.
    pub fn set(&self, units: u64) {
        self.0.store(units.min(UNREPORTED - 1), Ordering::Release);
    }

    /// The cost reported so far; `None` if nothing was.
    ///
    /// ```
    /// let meter = tollgate_tower::CostMeter::new();
    /// assert_eq!(meter.get(), None);
    /// meter.add(5);
    /// meter.clone().add(7);
    /// assert_eq!(meter.get(), Some(12));
    /// ```
    pub fn get(&self) -> Option<u64> {
        let now = self.0.load(Ordering::Acquire);
        (now != UNREPORTED).then_some(now)
    }
}
