//! Recording `tracing` events, to assert on refusal events: core's recorder, and a filter for
//! one rule's refusals.

pub(crate) use tollgate_testing::{EventRecorder as Recorder, RecordedEvent as Recorded};

/// The `tollgate::refusal` events of one rule.
pub(crate) trait RefusalsBy {
    /// The per-refusal (`debug`) `tollgate::refusal` events of `policy` so far (from any test:
    /// use a policy of one test's own).
    fn refusals_by(&self, policy: &str) -> Vec<Recorded>;

    /// The `info` summaries of `policy`'s refusals so far.
    #[allow(dead_code, reason = "not every test file reads summaries")]
    fn summaries_of(&self, policy: &str) -> Vec<Recorded>;

    /// The keys `policy`'s refusal events show, as logged.
    #[allow(dead_code, reason = "not every test file reads keys")]
    fn keys_refused_by(&self, policy: &str) -> Vec<String> {
        self.refusals_by(policy)
            .iter()
            .map(|event| event.field("key").unwrap_or_default().to_owned())
            .collect()
    }
}

impl RefusalsBy for Recorder {
    fn refusals_by(&self, policy: &str) -> Vec<Recorded> {
        of_level(self, policy, tracing::Level::DEBUG)
    }

    fn summaries_of(&self, policy: &str) -> Vec<Recorded> {
        of_level(self, policy, tracing::Level::INFO)
    }
}

fn of_level(recorder: &Recorder, policy: &str, level: tracing::Level) -> Vec<Recorded> {
    let mut events = recorder.on_target("tollgate::refusal");
    events.retain(|event| event.field("rule") == Some(policy) && event.level == level);
    events
}
