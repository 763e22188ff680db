//! An operator's reset: forget what a rule counted for one caller, named by value.

use tollgate_core::{RuleId, Store, StoreError};

use crate::handle::LayerHandle;

use tollgate_key::{KeyValueError, key_of_values};

/// What [`LayerHandle::reset`] cleared.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResetDone {
    /// The caller's key as the layer's [`KeyLogging`](crate::KeyLogging) shows it (a
    /// fingerprint by default), to match against logs and the top refused callers.
    pub caller: String,
    /// The store entries cleared: the rule's own count and, for an escalating rule, its strikes
    /// and block.
    pub cleared: Vec<RuleId>,
}

/// Why [`LayerHandle::reset`] cleared nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResetError {
    /// No rule in force has this id.
    #[error("no rule {0:?} is in force")]
    UnknownRule(String),
    /// The values do not name a caller of the rule's key.
    #[error("cannot name a caller of rule {rule:?}: {error}")]
    Key {
        /// The rule.
        rule: String,
        /// What is wrong with the values.
        error: KeyValueError,
    },
    /// The store failed; the count may or may not have been cleared (a reset can be repeated).
    #[error("the store failed while resetting rule {rule:?}: {error}")]
    Store {
        /// The rule.
        rule: String,
        /// What the store said.
        error: StoreError,
    },
}

impl LayerHandle {
    /// Forgets what rule `rule` counted for the caller `values` name, one value per part of the
    /// rule's key, normalised by the rule's own key extractor exactly as a request would be
    /// (an IPv6 address becomes its /64 when the rule groups so; a header value is trimmed;
    /// see [`KeyExtractor::key_from_values`](crate::key::KeyExtractor::key_from_values)). An
    /// escalating rule's strikes and block go too, so a blocked caller gets through at once, and
    /// so do the sub-buckets of a rule spread over them.
    ///
    /// ```
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use tollgate_core::{MemoryStore, Quota};
    /// use tollgate_tower::{RateLimitLayer, Rule};
    /// use tollgate_tower::client_ip::IpGrouping;
    /// use tollgate_tower::key::PeerIp;
    ///
    /// let per_ip = PeerIp::new().grouping(IpGrouping::default());
    /// let layer = RateLimitLayer::new(MemoryStore::new())
    ///     .rule(Rule::new("reads", Quota::fixed_window(50, Duration::from_secs(60))?, per_ip)?);
    /// let done = layer.handle().reset("reads", &["2001:db8::1"]).await?;
    /// assert_eq!(done.cleared.len(), 1);
    /// # Ok(()) }
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(run()).unwrap();
    /// ```
    pub async fn reset(&self, rule: &str, values: &[&str]) -> Result<ResetDone, ResetError> {
        let rules = self.rules();
        let Some(found) = rules
            .rules()
            .find(|candidate| candidate.id().as_str() == rule)
        else {
            return Err(ResetError::UnknownRule(rule.to_owned()));
        };
        let key = key_of_values(&*found.key, values).map_err(|error| ResetError::Key {
            rule: rule.to_owned(),
            error,
        })?;
        let mut cleared = vec![found.id().clone()];
        // Every sub-bucket the rule's configuration names, whether or not this gateway has
        // counted in it since it started.
        let spread = found.modes.sub_buckets();
        if spread > 1 {
            cleared.extend((0..spread).map(|index| found.id().sub_bucket(index, spread)));
        }
        if let Some(escalated) = &found.escalation {
            cleared.extend(escalated.rule_ids().into_iter().cloned());
        }
        for id in &cleared {
            self.store()
                .reset(id, &key)
                .await
                .map_err(|error| ResetError::Store {
                    rule: rule.to_owned(),
                    error,
                })?;
        }
        Ok(ResetDone {
            caller: self.key_logging().show(&key),
            cleared,
        })
    }
}
