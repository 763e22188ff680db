//! Refusals as events on target `tollgate::refusal`: each refusal, real or shadow, is a `debug`
//! event (so an attack cannot flood logs kept at `info`), and each rule sums its refusals up in
//! one `info` event at most once a minute. The allowed path emits nothing. Always on.

use std::sync::Arc;

use tollgate_core::{Decision, Key, RuleId};

use super::RuleObserver;
use super::key_logging::KeyLogging;
use super::notices::RuleNotices;

/// One rule's log: its refusal events and their summary.
pub(crate) struct RuleLog {
    pub(crate) rule: RuleId,
    pub(crate) notices: Arc<RuleNotices>,
}

impl RuleObserver for RuleLog {
    fn refused(&self, key: &Key, decision: &Decision, enforced: bool, logging: KeyLogging) {
        self.notices.refused(&self.rule);
        log_refusal(&self.rule, key, decision, enforced, logging);
    }
}

/// Emits the `debug` `tollgate::refusal` event for a refusal of `key` by policy `rule` — the
/// one event every refusal produces, whether the layer or a typed limit in a handler refused.
/// `enforced` is false for a shadow (or flag) rule's would-be refusal.
pub(crate) fn log_refusal(
    rule: &RuleId,
    key: &Key,
    decision: &Decision,
    enforced: bool,
    logging: KeyLogging,
) {
    let key = logging.show(key);
    tracing::debug!(
        target: "tollgate::refusal",
        rule = %rule,
        enforced,
        key = %key,
        reason = ?decision.refusal(),
        limit = decision.limit(),
        remaining = decision.remaining(),
        retry_after_ms = decision.retry_after().as_millis() as u64,
        "rate limit refusal"
    );
}
