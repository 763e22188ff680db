//! Refusals as events on target `tollgate::refusal`: each refusal, real or shadow, is a `debug`
//! event (so an attack cannot flood logs kept at `info`), and each rule of the layer sums its
//! refusals up in one `info` event at most once a minute. The allowed path emits nothing.

use tollgate_core::{Decision, Key, RuleId};

use crate::Rule;
use crate::settings::{KeyLogging, Settings};

/// Records one refusal (`enforced`: it refused the request; otherwise a shadow or flag rule's
/// would-be refusal).
pub(crate) fn refusal(
    settings: &Settings,
    rule: &Rule,
    key: &Key,
    decision: &Decision,
    enforced: bool,
) {
    rule.notices.refused(&rule.id);
    if let Some(top) = &settings.top_refused {
        top.offer(&rule.id, key);
    }
    record_refusal(&rule.id, key, decision, enforced, settings.key_logging);
}

/// Emits the `debug` `tollgate::refusal` event for a refusal of `key` by policy `rule` — the one event
/// every refusal produces, whether the layer or a typed limit in a handler refused.
/// `enforced` is false for a shadow (or flag) rule's would-be refusal.
///
/// ```
/// use std::time::Duration;
/// use tollgate_core::{Decision, Key, Refusal, RuleId};
/// use tollgate_tower::KeyLogging;
/// use tollgate_tower::events::record_refusal;
///
/// let refused = Decision::refused(Refusal::LimitReached, 10, 0, Duration::from_secs(60), Duration::from_secs(6));
/// record_refusal(&RuleId::new("login")?, &Key::new("user77"), &refused, true, KeyLogging::Hashed);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn record_refusal(
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
