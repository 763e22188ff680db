//! Charging a gRPC call per inbound message ([`Rule::per_message`](crate::Rule::per_message)):
//! the first message is paid when the call opens, with the call's other rules; the request body
//! is wrapped so that each further message is checked before its first byte reaches the
//! service; a refused message ends the inbound stream with the refusal's status
//! (what the handler reads as its stream's error) and cuts the response with it.

use std::any::{Any, TypeId};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use smallvec::SmallVec;
use tollgate_core::{BatchDecision, DynStore, Item, OnStoreFailure, Store, StoreError};
use tonic::Status;

use super::framing::Framing;
use crate::headers::grpc;
use crate::headers::refused::Refused;
use crate::observe::key_logging::KeyLogging;
use crate::pipeline::cut::StreamCut;
use crate::pipeline::plan::Plan;
use crate::pipeline::plan::Planned;
use crate::rules::rule_set::RuleSet;
use crate::settings::Settings;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What a call's per-message rules need to charge its messages: the rules with their keys,
/// the store, and the cut its response ends with.
pub(crate) struct MessageCharges {
    pub(crate) store: DynStore,
    pub(crate) rules: Arc<RuleSet>,
    pub(crate) planned: Vec<Planned>,
    pub(crate) gateway: Option<u32>,
    pub(crate) key_logging: KeyLogging,
    /// The wait a closed rule's `UNAVAILABLE` asks for while the store is down.
    pub(crate) unavailable_retry_after: Duration,
    pub(crate) cut: Arc<StreamCut>,
}

/// What one message gets.
enum Verdict {
    /// Passed on, after this long (a pacing quota's delay).
    Pass(Duration),
    /// Refused: the call ends with this status.
    Stop(Status),
}

/// A message's check still being answered (a remote store, a pacing delay).
type Checking = Pin<Box<dyn Future<Output = Verdict> + Send>>;

impl MessageCharges {
    /// The store items of one message, in plan order.
    fn items(&self) -> SmallVec<[Item<'_>; 2]> {
        self.planned
            .iter()
            .filter_map(|planned| Some(planned.item(self.rules.get(planned.rule)?, self.gateway)))
            .collect()
    }

    /// Checks one message: answered now when the store can (in memory), else later.
    fn check(self: &Arc<Self>) -> Result<Verdict, Checking> {
        let items = self.items();
        if let Some(answer) = self.store.check_now(&items) {
            return Ok(self.verdict(&items, answer));
        }
        let charges = Arc::clone(self);
        Err(Box::pin(async move {
            let items = charges.items();
            let answer = charges.store.check(&items).await;
            charges.verdict(&items, answer)
        }))
    }

    /// What the store's `answer` to `items` means for the message, told to each rule's
    /// observers as a call's decision is.
    fn verdict(&self, items: &[Item<'_>], answer: Result<BatchDecision, StoreError>) -> Verdict {
        let batch = match answer {
            Ok(batch) => batch,
            Err(error) => return self.store_failed(&error),
        };
        let rules = || {
            self.planned
                .iter()
                .filter_map(|planned| Some((planned, self.rules.get(planned.rule)?)))
        };
        for ((planned, rule), answer) in rules().zip(batch.items()) {
            let Some(observers) = self.rules.observers(planned.rule) else {
                continue;
            };
            let decision = answer.decision();
            observers.decided(decision, rule.can_refuse(), answer.refused_locally());
            if !decision.is_allowed() {
                observers.refused(&planned.key, decision, rule.can_refuse(), self.key_logging);
            }
        }
        if batch.is_allowed() {
            return Verdict::Pass(batch.delay(items));
        }
        let Some((position, answer)) = batch.worst_refusal(items) else {
            return Verdict::Pass(Duration::ZERO);
        };
        let Some((planned, rule)) = rules().nth(position) else {
            return Verdict::Pass(Duration::ZERO);
        };
        let quota = items
            .get(position)
            .and_then(|item| answer.counted_quota(item))
            .unwrap_or(planned.quota);
        let refused = Refused::new(&rule.id, quota, *answer.decision(), HeaderMap::new())
            .answered_with(rule.on_refusal.http_status());
        Verdict::Stop(refused.grpc_status())
    }

    /// The store could not answer: an enforcing rule failing closed stops the call with
    /// `UNAVAILABLE`; otherwise the message passes.
    fn store_failed(&self, error: &StoreError) -> Verdict {
        let mut closed = None;
        for planned in &self.planned {
            let Some(rule) = self.rules.get(planned.rule) else {
                continue;
            };
            let fails_closed = rule.on_store_failure == OnStoreFailure::Closed;
            if let Some(observers) = self.rules.observers(planned.rule) {
                observers.store_failed(!fails_closed, rule.can_refuse());
            }
            if fails_closed && rule.can_refuse() {
                closed.get_or_insert(rule);
            }
        }
        match closed {
            Some(rule) => {
                tracing::error!(
                    target: "tollgate::store",
                    rule = %rule.id,
                    %error,
                    "rate-limit store failed; the rule fails closed, ending the gRPC call"
                );
                Verdict::Stop(grpc::unavailable_status(self.unavailable_retry_after))
            }
            None => {
                tracing::warn!(
                    target: "tollgate::store",
                    %error,
                    "rate-limit store failed; the message's rules fail open"
                );
                Verdict::Pass(Duration::ZERO)
            }
        }
    }
}

/// The layer cannot read a call's messages, and an enforcing rule asks it to: answer
/// `INTERNAL` ([`grpc::misconfigured`]).
#[derive(Debug)]
pub(crate) struct Unreadable;

/// Whether the layer can wrap a request body of type `B` and hand the service the same type:
/// tonic's and axum's bodies can box any body.
fn rebuildable<B: 'static>() -> bool {
    let body = TypeId::of::<B>();
    body == TypeId::of::<tonic::body::Body>() || body == TypeId::of::<axum_core::body::Body>()
}

/// Wraps `body` (of a [`rebuildable`] type) so each of its inbound messages is charged to
/// `charges`.
fn count_messages<B: 'static>(body: B, charges: MessageCharges) -> B {
    let mut body = Some(body);
    let slot: &mut dyn Any = &mut body;
    if let Some(slot) = slot.downcast_mut::<Option<tonic::body::Body>>() {
        let inner = slot.take().expect("the body was just put in the slot");
        *slot = Some(tonic::body::Body::new(CountedMessages::new(inner, charges)));
    } else if let Some(slot) = slot.downcast_mut::<Option<axum_core::body::Body>>() {
        let inner = slot.take().expect("the body was just put in the slot");
        *slot = Some(axum_core::body::Body::new(CountedMessages::new(
            inner, charges,
        )));
    }
    body.expect("the slot holds the body")
}

pin_project! {
    /// A request body whose gRPC messages are each charged before they are passed on.
    struct CountedMessages<B> {
        #[pin]
        body: B,
        charges: Arc<MessageCharges>,
        framing: Framing,
        // Data read from `body` and not yet passed on: it starts with a message to admit.
        pending: Option<Bytes>,
        checking: Option<Checking>,
        stopped: bool,
    }
}

impl<B> CountedMessages<B> {
    fn new(body: B, charges: MessageCharges) -> Self {
        CountedMessages {
            body,
            charges: Arc::new(charges),
            framing: Framing::first_admitted(),
            pending: None,
            checking: None,
            stopped: false,
        }
    }
}

impl<B> Body for CountedMessages<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let mut this = self.project();
        loop {
            if *this.stopped {
                return Poll::Ready(None);
            }
            if let Some(checking) = this.checking.as_mut() {
                let verdict = ready!(checking.as_mut().poll(cx));
                *this.checking = None;
                match verdict {
                    Verdict::Pass(delay) if !delay.is_zero() => {
                        *this.checking = Some(Box::pin(async move {
                            tokio::time::sleep(delay).await;
                            Verdict::Pass(Duration::ZERO)
                        }));
                        continue;
                    }
                    Verdict::Pass(_) => this.framing.admit(),
                    Verdict::Stop(status) => {
                        *this.stopped = true;
                        *this.pending = None;
                        this.charges.cut.cut(trailers_of(&status));
                        return Poll::Ready(Some(Err(Box::new(status))));
                    }
                }
            }
            if let Some(mut data) = this.pending.take() {
                let passed = this.framing.pass(&data);
                if passed == data.len() {
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                let head = data.split_to(passed);
                *this.pending = Some(data);
                if !head.is_empty() {
                    return Poll::Ready(Some(Ok(Frame::data(head))));
                }
                // A message starts here: check it before passing a byte of it.
                *this.checking = Some(match this.charges.check() {
                    Ok(verdict) => Box::pin(std::future::ready(verdict)),
                    Err(later) => later,
                });
                continue;
            }
            match ready!(this.body.as_mut().poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => *this.pending = Some(data),
                    Err(frame) => return Poll::Ready(Some(Ok(frame))),
                },
                Some(Err(error)) => return Poll::Ready(Some(Err(error.into()))),
                None => return Poll::Ready(None),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.stopped
            || (self.pending.is_none() && self.checking.is_none() && self.body.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        if self.stopped {
            return SizeHint::with_exact(0);
        }
        // The body may be cut short: only its upper bound still holds.
        let mut hint = SizeHint::new();
        if let Some(upper) = self.body.size_hint().upper() {
            hint.set_upper(upper + self.pending.as_ref().map_or(0, |data| data.len() as u64));
        }
        hint
    }
}

/// The trailers that end a response with `status`.
fn trailers_of(status: &Status) -> HeaderMap {
    let mut trailers = HeaderMap::new();
    if status.add_header(&mut trailers).is_err() {
        trailers.insert(
            "grpc-status",
            http::HeaderValue::from(tonic::Code::ResourceExhausted as i32),
        );
    }
    trailers
}

/// Wraps the body of a call whose plan has per-message rules so that each inbound message is
/// charged, leaving the response's cut in the plan; other calls' bodies are returned as they
/// are. `Err`: the layer cannot read this body's messages (neither tonic's nor axum's), and an
/// enforcing rule asks it to, so the call is answered `INTERNAL` (logged as a
/// misconfiguration).
pub(crate) fn charge_each<B: 'static>(
    store: &DynStore,
    settings: &Settings,
    rules: &Arc<RuleSet>,
    plan: &mut Plan,
    body: B,
) -> Result<B, Unreadable> {
    if plan.messages.is_empty() {
        return Ok(body);
    }
    if !rebuildable::<B>() {
        let why = format!(
            "a per-message rule needs a request body of tonic's or axum's type to read its \
             messages from, not {}",
            std::any::type_name::<B>()
        );
        let mut enforcing = false;
        for planned in &plan.messages {
            if let Some(rule) = rules.get(planned.rule) {
                rule.notices
                    .misconfigured(&rule.id, &why, rule.can_refuse());
                enforcing |= rule.can_refuse();
            }
        }
        plan.messages.clear();
        return if enforcing { Err(Unreadable) } else { Ok(body) };
    }
    let cut = Arc::new(StreamCut::default());
    let charges = MessageCharges {
        store: store.clone(),
        rules: Arc::clone(rules),
        planned: std::mem::take(&mut plan.messages),
        gateway: settings.gateway,
        key_logging: settings.key_logging,
        unavailable_retry_after: settings.unavailable_retry_after,
        cut: Arc::clone(&cut),
    };
    plan.cut = Some(cut);
    Ok(count_messages(body, charges))
}
