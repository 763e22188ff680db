//! Recording `tracing` events, so tests can assert what was logged (refusal events, a store
//! falling back and recovering).

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// One recorded event: its target, level and fields as text (the message is the field
/// `message`).
#[derive(Debug, Clone)]
pub struct RecordedEvent {
    /// The event's target, such as `tollgate::store`.
    pub target: String,
    /// The event's level.
    pub level: Level,
    /// Every field, in order, as text (`Debug` unless recorded as a string).
    pub fields: Vec<(String, String)>,
}

impl RecordedEvent {
    /// The value of the field `name`, if the event has it.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(field, _)| field == name)
            .map(|(_, value)| value.as_str())
    }
}

impl Visit for RecordedEvent {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.fields
            .push((field.name().to_owned(), format!("{value:?}")));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.fields
            .push((field.name().to_owned(), value.to_owned()));
    }
}

/// A `tracing` subscriber that keeps every event.
///
/// ```
/// use tollgate_testing::EventRecorder;
///
/// let recorder = EventRecorder::global();
/// tracing::warn!(target: "doc::example", attempt = 3, "store failed");
/// let events = recorder.on_target("doc::example");
/// assert_eq!(events[0].level, tracing::Level::WARN);
/// assert_eq!(events[0].field("attempt"), Some("3"));
/// assert_eq!(events[0].field("message"), Some("store failed"));
/// ```
#[derive(Clone, Default)]
pub struct EventRecorder(Arc<Mutex<Vec<RecordedEvent>>>);

impl EventRecorder {
    /// The recorder of this process, installed as the global subscriber on first use. A
    /// subscriber set for one thread only would miss events: when only one is set, tracing asks
    /// the thread that first reaches a callsite whether it is interesting, and a test running
    /// without a subscriber on another thread would have it cached as "never".
    ///
    /// # Panics
    ///
    /// If another global subscriber was installed first.
    pub fn global() -> &'static EventRecorder {
        static RECORDER: OnceLock<EventRecorder> = OnceLock::new();
        RECORDER.get_or_init(|| {
            let recorder = EventRecorder::default();
            let installed = tracing::subscriber::set_global_default(recorder.clone());
            assert!(
                installed.is_ok(),
                "another global tracing subscriber exists"
            );
            recorder
        })
    }

    /// Every event so far (from any test of the process: filter by something of one test's
    /// own).
    pub fn events(&self) -> Vec<RecordedEvent> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The events so far whose target is `target`.
    pub fn on_target(&self, target: &str) -> Vec<RecordedEvent> {
        let mut events = self.events();
        events.retain(|event| event.target == target);
        events
    }
}

impl fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventRecorder").finish_non_exhaustive()
    }
}

impl Subscriber for EventRecorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut recorded = RecordedEvent {
            target: event.metadata().target().to_owned(),
            level: *event.metadata().level(),
            fields: Vec::new(),
        };
        event.record(&mut recorded);
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(recorded);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}
