//! Recording `tracing` events, to assert on refusal events: core's recorder, and a filter for
//! one rule's refusals.

pub(crate) use tollgate_core::testing::{EventRecorder as Recorder, RecordedEvent as Recorded};

/// The `tollgate::refusal` events of one rule.
pub(crate) trait RefusalsBy {
    /// The `tollgate::refusal` events of `policy` so far (from any test: use a policy of one
    /// test's own).
    fn refusals_by(&self, policy: &str) -> Vec<Recorded>;
}

impl RefusalsBy for Recorder {
    fn refusals_by(&self, policy: &str) -> Vec<Recorded> {
        let mut events = self.on_target("tollgate::refusal");
        events.retain(|event| event.field("rule") == Some(policy));
        events
    }
}
