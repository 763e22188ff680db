//! Refusals as events: each refusal, real or shadow, is a `tracing` event on target
//! `tollgate::refusal`. The allowed path emits nothing.

use tollgate_core::{Decision, Key};

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
    let key = match settings.key_logging {
        KeyLogging::Hashed => key.fingerprint(),
        KeyLogging::Raw => format!("{key:?}"),
    };
    tracing::info!(
        target: "tollgate::refusal",
        rule = %rule.id,
        enforced,
        key = %key,
        reason = ?decision.refusal(),
        limit = decision.limit(),
        remaining = decision.remaining(),
        retry_after_ms = decision.retry_after().as_millis() as u64,
        "rate limit refusal"
    );
}
