//! Recording `tracing` events, to assert on refusal events.

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// One recorded event: its target and fields as text.
#[derive(Debug, Clone, Default)]
pub(crate) struct Recorded {
    pub(crate) target: String,
    pub(crate) fields: Vec<(String, String)>,
}

impl Recorded {
    pub(crate) fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(field, _)| field == name)
            .map(|(_, value)| value.as_str())
    }
}

impl Visit for Recorded {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.fields
            .push((field.name().to_owned(), format!("{value:?}")));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.fields
            .push((field.name().to_owned(), value.to_owned()));
    }
}

/// A subscriber that keeps every event.
#[derive(Clone, Default)]
pub(crate) struct Recorder(Arc<Mutex<Vec<Recorded>>>);

impl Recorder {
    /// The recorder of this test binary, installed as the global subscriber on first use. A
    /// subscriber set for one thread only would miss events: when only one is set, tracing asks
    /// the thread that first reaches a callsite whether it is interesting, and a test running
    /// without a subscriber on another thread would have it cached as "never".
    pub(crate) fn global() -> &'static Recorder {
        static RECORDER: OnceLock<Recorder> = OnceLock::new();
        RECORDER.get_or_init(|| {
            let recorder = Recorder::default();
            tracing::subscriber::set_global_default(recorder.clone())
                .expect("no other global subscriber");
            recorder
        })
    }

    /// The `tollgate::refusal` events of `policy` so far (from any test: use a policy of one
    /// test's own).
    pub(crate) fn refusals_by(&self, policy: &str) -> Vec<Recorded> {
        let events = self.0.lock().expect("recorder lock");
        events
            .iter()
            .filter(|event| event.target == "tollgate::refusal")
            .filter(|event| event.field("rule") == Some(policy))
            .cloned()
            .collect()
    }
}

impl Subscriber for Recorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut recorded = Recorded {
            target: event.metadata().target().to_owned(),
            ..Recorded::default()
        };
        event.record(&mut recorded);
        self.0.lock().expect("recorder lock").push(recorded);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}
