//! Everything that observes the layer's decisions, in one place and through one trait: the
//! refusal events and their once-a-minute summaries (always on), each rule's [`alerts`] as it
//! nears its limit (on for the rules that state a share), metrics
//! ([`RateLimitLayer::metrics`](crate::RateLimitLayer::metrics)), the admin counters
//! ([`track_stats`](crate::RateLimitLayer::track_stats)), the top refused callers
//! ([`track_top_refused`](crate::RateLimitLayer::track_top_refused)), and any
//! [`Observer`] of your own ([`RateLimitLayer::observe`](crate::RateLimitLayer::observe)).
//!
//! An observer is asked once per rule, when a rule set is installed (or a typed limit is first
//! used), for what it keeps for that rule — a [`RuleObserver`] — so the request path only calls
//! methods on objects made in advance: no lookup by rule id, no allocation. Each method runs on
//! the request path and must not block; send anything slow to a channel that drops when full.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use std::time::Duration;
//! use tollgate_core::{Decision, Key, MemoryStore, Quota, RuleId};
//! use tollgate_tower::observe::{Observer, RuleObserver};
//! use tollgate_tower::key::Global;
//! use tollgate_tower::{KeyLogging, RateLimitLayer, Rule};
//!
//! /// Counts refusals of every rule together.
//! #[derive(Default)]
//! struct Refusals(Arc<AtomicU64>);
//!
//! impl Observer for Refusals {
//!     fn rule(&self, _rule: &RuleId) -> Arc<dyn RuleObserver> {
//!         Arc::new(Refusals(Arc::clone(&self.0)))
//!     }
//! }
//!
//! impl RuleObserver for Refusals {
//!     fn refused(&self, _key: &Key, _decision: &Decision, _enforced: bool, _logging: KeyLogging) {
//!         self.0.fetch_add(1, Ordering::Relaxed);
//!     }
//! }
//!
//! let refusals = Refusals::default();
//! let seen = Arc::clone(&refusals.0);
//! let layer = RateLimitLayer::new(MemoryStore::new())
//!     .rule(Rule::new("all", Quota::fixed_window(100, Duration::from_secs(1))?, Global)?)
//!     .observe(refusals);
//! # let _ = (layer, seen);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod alerts;
pub(crate) mod key_logging;
mod log;
#[cfg(feature = "metrics")]
mod metrics;
pub(crate) mod notices;
pub(crate) mod observers;
pub mod stats;
pub mod top_refused;

use std::sync::Arc;

use tollgate_core::{Decision, Key, RuleId};

use self::key_logging::KeyLogging;

pub use self::observers::RuleObservers;

/// Something that observes a layer's decisions: asked once per rule for what it keeps for that
/// rule, and told of rule loads.
pub trait Observer: Send + Sync + 'static {
    /// What this observer keeps for `rule` (counters, a label): made when a rule set holding it
    /// is installed, and used for that rule's every decision until the next install.
    fn rule(&self, rule: &RuleId) -> Arc<dyn RuleObserver>;

    /// A rule file or fleet document was loaded (`ok`) or refused for its mistakes.
    fn rules_loaded(&self, ok: bool) {
        let _ = ok;
    }
}

/// What an [`Observer`] keeps for one rule; each method is called on the request path.
pub trait RuleObserver: Send + Sync + 'static {
    /// The store decided for this rule: allowed or refused (`enforcing`: a refusal stops the
    /// request; else the rule is a shadow or flag rule), `refused_locally` when a cache of
    /// blocked callers refused without asking the store.
    fn decided(&self, decision: &Decision, enforcing: bool, refused_locally: bool) {
        let _ = (decision, enforcing, refused_locally);
    }

    /// The rule refused `key` (`enforced`: the request was refused; else a shadow or flag
    /// rule's would-be refusal); `logging` is how the layer (or the typed limit) that refused
    /// shows keys in logs ([`KeyLogging::show`]).
    fn refused(&self, key: &Key, decision: &Decision, enforced: bool, logging: KeyLogging) {
        let _ = (key, decision, enforced, logging);
    }

    /// The store could not answer; the rule's failure policy let the request through
    /// (`let_through`) or refused it.
    fn store_failed(&self, let_through: bool, enforcing: bool) {
        let _ = (let_through, enforcing);
    }

    /// A request took `slots` of this concurrency rule's slots (it runs now), or gave them back
    /// (`taken` false: its response ended, or it was dropped).
    fn slots_held(&self, slots: u64, taken: bool) {
        let _ = (slots, taken);
    }
}
