//! The layer behind the admin API, its store type erased so handlers are plain functions.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tollgate_core::{RuleId, Store};
use tollgate_tower::stats::RuleStats;
use tollgate_tower::top_refused::TopRefusedReport;
use tollgate_tower::{RateLimitLayer, ResetDone, ResetError, RuleSet};

use crate::health::{StoreHealth, StoreReport};

/// A boxed future, as a trait object's async method returns.
pub(crate) type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the admin API asks of a layer.
pub(crate) trait Limiter: Send + Sync + 'static {
    fn rules(&self) -> Arc<RuleSet>;
    fn stats(&self, rule: &RuleId) -> Option<RuleStats>;
    fn top_refused(&self, rule: &RuleId, n: usize) -> Option<TopRefusedReport>;
    fn reset<'a>(
        &'a self,
        rule: &'a str,
        values: &'a [&'a str],
    ) -> Boxed<'a, Result<ResetDone, ResetError>>;
    fn health(&self) -> Boxed<'_, StoreReport>;
}

impl<St: Store + StoreHealth> Limiter for RateLimitLayer<St> {
    fn rules(&self) -> Arc<RuleSet> {
        self.current_rules()
    }

    fn stats(&self, rule: &RuleId) -> Option<RuleStats> {
        self.rule_stats(rule)
    }

    fn top_refused(&self, rule: &RuleId, n: usize) -> Option<TopRefusedReport> {
        RateLimitLayer::top_refused(self, rule, n)
    }

    fn reset<'a>(
        &'a self,
        rule: &'a str,
        values: &'a [&'a str],
    ) -> Boxed<'a, Result<ResetDone, ResetError>> {
        Box::pin(RateLimitLayer::reset(self, rule, values))
    }

    fn health(&self) -> Boxed<'_, StoreReport> {
        Box::pin(self.store().health())
    }
}
