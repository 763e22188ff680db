//! An alert as a rule nears its limit: one mechanism for every rule that states a share
//! ([`Rule::with_alert_at`](crate::Rule::with_alert_at), `alert_at` in a rule file).
//!
//! **Raised** the first time any caller's decision reaches the share of its limit (of its own
//! quota, an override's if it has one): for a global cap, the one count; for a per-key rule, its
//! busiest key — any key at the share raises the rule's alert. **Cleared** once no decision has
//! reached the share for as long as the allowance of the last ones that did takes to be whole
//! again (each decision's `reset_after`: a fixed window's end, a bucket's refill), timed from
//! the first look after the decision — so up to a second late, never early. That wait is the
//! hysteresis: a cap that hovers at the share stays raised rather than flapping, and a key that
//! stops calling lets the alert clear once its allowance would be whole. For a concurrency rule
//! the share is of slots held, and the alert clears at the first look with no request at the
//! share since the one before.
//!
//! Each change is announced once, never per request: a `warn` event on target `tollgate::alert`
//! when raised and an `info` one when cleared (fields `rule`, `alert_at`, `reached`, and when
//! cleared `alerted_for_s`), and with [metrics](crate::RateLimitLayer::metrics) the gauge
//! `tollgate_rule_alerting{rule}` (1 while raised, 0 otherwise, from the rule's install) and the
//! counter `tollgate_alerts_total{rule}` (alerts raised). [`LayerHandle::alerts`](crate::LayerHandle::alerts)
//! lists the rules alerting now, since when and the highest share reached.
//!
//! **Off the request path.** A rule without a share costs nothing. A rule with one costs a
//! comparison of the decision's remaining and limit; past the share, one atomic word read
//! (written only when the share reached or the wait grows). A thread of the layer's own looks
//! each second, and every [`alerts`](crate::LayerHandle::alerts) call looks first, on the
//! layer's [alert clock](crate::RateLimitLayer::alert_clock).
//!
//! ```
//! use std::time::Duration;
//! use tollgate_core::{MemoryStore, Quota, Timestamp};
//! use tollgate_testing::ManualClock;
//! use tollgate_tower::key::Global;
//! use tollgate_tower::{AlertShare, RateLimitLayer, Rule};
//! use tower::{Layer, Service, ServiceExt, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let clock = ManualClock::new(Timestamp::from_secs(1_800_000_000));
//! let cap = Rule::new("codes", Quota::fixed_window(10, Duration::from_secs(60))?, Global)?
//!     .with_alert_at(AlertShare::new(0.8)?);
//! let layer = RateLimitLayer::new(MemoryStore::builder().clock(clock.clone()).build())
//!     .rule(cap)
//!     .alert_clock(clock.clone());
//! let mut service = layer.layer(service_fn(|_: http::Request<()>| async {
//!     Ok::<_, std::convert::Infallible>(http::Response::new(()))
//! }));
//! for _ in 0..8 {
//!     service.ready().await?.call(http::Request::new(())).await?;
//! }
//! let alerts = layer.handle().alerts();
//! assert_eq!(alerts[0].rule.as_str(), "codes");
//! assert_eq!(alerts[0].reached, 0.8);
//! clock.advance(Duration::from_secs(60)); // the window ends: whole again
//! assert!(layer.handle().alerts().is_empty());
//! # Ok(())
//! # }
//! ```

mod clock;
mod share;
mod state;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::Duration;

use tollgate_core::{Clock, RuleId, Timestamp};

use self::clock::AlertClock;
use self::state::{AlertState, RuleAlert};
use super::RuleObserver;

pub use self::share::{AlertShare, AlertShareError};

/// How often the layer's thread looks at its alerts.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// A rule alerting now ([`LayerHandle::alerts`](crate::LayerHandle::alerts)).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Alert {
    /// The rule.
    pub rule: RuleId,
    /// The share of its limit it alerts at.
    pub alert_at: AlertShare,
    /// The highest share of its limit a caller reached since the alert was raised, from the
    /// share to 1 (1: refused).
    pub reached: f64,
    /// When the alert was raised, on the layer's alert clock.
    pub since: Timestamp,
}

/// Every alerting rule's alert by id, held weakly (the installed rule sets own them, so a
/// reload that keeps a rule keeps its alert), the clock they are timed on, and the thread that
/// looks at them, started with the first rule that alerts.
#[derive(Default)]
pub(crate) struct AlertBook {
    shared: Arc<Shared>,
    looking: OnceLock<()>,
}

#[derive(Default)]
struct Shared {
    clock: Arc<AlertClock>,
    rules: Mutex<HashMap<RuleId, Weak<AlertState>>>,
}

impl Shared {
    /// Every alert some installed rule set holds.
    fn live(&self) -> Vec<Arc<AlertState>> {
        let rules = self.rules.lock().unwrap_or_else(PoisonError::into_inner);
        rules.values().filter_map(Weak::upgrade).collect()
    }
}

impl AlertBook {
    /// What the alerts keep for `rule`, which alerts at `share` (made when a rule set is
    /// installed); with `metered`, its gauge and counter too.
    pub(crate) fn rule(
        &self,
        rule: &RuleId,
        share: AlertShare,
        metered: bool,
    ) -> Arc<dyn RuleObserver> {
        let state = {
            let mut rules = (self.shared.rules.lock()).unwrap_or_else(PoisonError::into_inner);
            rules.retain(|_, state| state.strong_count() > 0);
            match rules.get(rule).and_then(Weak::upgrade) {
                Some(state) => state,
                None => {
                    let clock = Arc::clone(&self.shared.clock);
                    let state = Arc::new(AlertState::new(rule, share, clock));
                    rules.insert(rule.clone(), Arc::downgrade(&state));
                    state
                }
            }
        };
        state.alerts_at(share);
        #[cfg(feature = "metrics")]
        if metered {
            let raised = state.is_raised();
            let _ = (state.metrics)
                .get_or_init(|| crate::observe::metrics::AlertMetrics::new(rule, raised));
        }
        let _ = metered;
        self.looking.get_or_init(|| self.start_looking());
        Arc::new(RuleAlert { share, state })
    }

    /// The thread that looks at every alert each second, until the layer is gone.
    fn start_looking(&self) {
        let shared = Arc::downgrade(&self.shared);
        let _ = std::thread::Builder::new()
            .name("tollgate-alerts".to_owned())
            .spawn(move || {
                loop {
                    std::thread::sleep(LOOK_EVERY);
                    let Some(shared) = shared.upgrade() else {
                        return;
                    };
                    for state in shared.live() {
                        state.look();
                    }
                }
            });
    }

    /// Alerts are timed on `clock` from now on.
    pub(crate) fn set_clock(&self, clock: Arc<dyn Clock>) {
        self.shared.clock.set(clock);
    }

    /// The rules alerting now, by id, after a look at each.
    pub(crate) fn alerts(&self) -> Vec<Alert> {
        let mut alerts: Vec<Alert> = (self.shared.live().iter())
            .filter_map(|state| {
                state.look();
                state.report()
            })
            .collect();
        alerts.sort_by(|a, b| a.rule.cmp(&b.rule));
        alerts
    }
}
