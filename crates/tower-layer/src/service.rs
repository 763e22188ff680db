//! The service: decides each request before the inner service sees it.

use std::marker::PhantomData;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::request::Parts;
use http::{Request, Response};
use tollgate_core::Store;
use tower_service::Service;

use crate::body::ResponseBody;
use crate::future::{ResponseFuture, finish};
use crate::headers::disclosure::Disclosure;
use crate::in_force::InForce;
use crate::pipeline::after_response::AfterResponse;
use crate::pipeline::charges::Charges;
use crate::pipeline::conclude::{Conclusion, conclude};
use crate::pipeline::plan::Plan;
#[cfg(feature = "grpc")]
use crate::pipeline::plan::Unplanned;
use crate::pipeline::respond;
use crate::pipeline::strike;
use crate::rules::rule_set::RuleSet;
use crate::settings::Settings;

/// Rate-limits requests to `S`; made by [`RateLimitLayer`](crate::RateLimitLayer).
///
/// Each request is matched against the rules, its keys are extracted, and every matching rule
/// goes to the store in **one** all-or-nothing call. With a store that answers at once (the
/// in-memory store) the decision is made inside `call`, and an allowed request costs no boxing:
/// only its keys and header values are allocated (plus the [`MatchedPattern`] extension when a
/// route-table row matched). Remote stores and pacing delays use a boxed future.
///
/// A request that waits (a pacing delay, a remote store) holds the capacity the inner service
/// reserved in `poll_ready` while it waits; with an inner concurrency limit, keep pacing delays
/// short.
///
/// [`MatchedPattern`]: crate::key::MatchedPattern
pub struct RateLimit<S, St> {
    inner: S,
    /// The store (one handle, its type erased: the store type is the layer's, for
    /// [`RateLimitLayer::store`](crate::RateLimitLayer::store)) and the rules in force.
    in_force: Arc<InForce>,
    settings: Arc<Settings>,
    store: PhantomData<fn() -> St>,
}

impl<S: Clone, St> Clone for RateLimit<S, St> {
    fn clone(&self) -> Self {
        RateLimit {
            inner: self.inner.clone(),
            in_force: Arc::clone(&self.in_force),
            settings: Arc::clone(&self.settings),
            store: PhantomData,
        }
    }
}

impl<S, St> RateLimit<S, St> {
    pub(crate) fn new(inner: S, in_force: Arc<InForce>, settings: Arc<Settings>) -> Self {
        RateLimit {
            inner,
            in_force,
            settings,
            store: PhantomData,
        }
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The wrapped service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: std::fmt::Debug, St> std::fmt::Debug for RateLimit<S, St> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimit")
            .field("inner", &self.inner)
            .field("store", &self.in_force.store)
            .field("rules", &self.in_force.rules.load())
            .finish_non_exhaustive()
    }
}

impl<S, St, B, ResBody> Service<Request<B>> for RateLimit<S, St>
where
    S: Service<Request<B>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    St: Store,
    B: Send + 'static,
    ResBody: Send + 'static,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, ResBody, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let (mut parts, body) = request.into_parts();
        // A guard, not a clone of the `Arc`: one load, no reference count touched (a request
        // that must wait for the store takes its own reference).
        let rules = self.in_force.rules.load();
        if self.settings.exemptions.covers(&parts) || rules.exempts(&parts) {
            return call_inner(&mut self.inner, parts, body, Disclosure::nothing(), None);
        }
        let mut plan = match Plan::new(&rules, self.settings.registry.as_ref(), &mut parts) {
            Ok(plan) => plan,
            Err(unplanned) => {
                let response = respond::unplanned(&unplanned, respond::is_grpc(&parts));
                return ResponseFuture::ready(response.map(ResponseBody::layer_written));
            }
        };
        #[cfg(feature = "grpc")]
        let body = match crate::grpc::messages::charge_each(
            &self.in_force.store,
            &self.settings,
            &rules,
            &mut plan,
            body,
        ) {
            Ok(body) => body,
            Err(_unreadable) => {
                let response =
                    respond::unplanned(&Unplanned::Misconfigured, respond::is_grpc(&parts));
                return ResponseFuture::ready(response.map(ResponseBody::layer_written));
            }
        };
        if plan.entries.is_empty() {
            // Nothing to check when the call opens (its rules charge each message).
            let charges = Charges {
                cut: plan.cut.take(),
                ..Charges::default()
            };
            let after = after_response(&self.in_force, charges);
            return call_inner(&mut self.inner, parts, body, Disclosure::nothing(), after);
        }
        let items = plan.items(&rules, self.settings.gateway);
        let Some(answer) = self.in_force.store.check_now(&items) else {
            drop(items);
            let (in_force, settings) = (Arc::clone(&self.in_force), Arc::clone(&self.settings));
            let inner = self.take_ready_inner();
            let rules = arc_swap::Guard::into_inner(rules);
            return call_after_store(inner, in_force, settings, rules, plan, parts, body);
        };
        let conclusion = conclude(&self.settings, &rules, &plan, &items, answer, &mut parts);
        drop(items);
        let next = Next::of(conclusion, &self.in_force, &self.settings, &rules, &plan);
        self.carry_out(next, parts, body)
    }
}

impl<S: Clone, St> RateLimit<S, St> {
    /// Does `next` inside `call`: answers at once, or calls the inner service now, or (after a
    /// pacing delay) in a boxed future.
    // A method of its own, as the compiler then arranges `call`: written inline there, the
    // route_matching bench measured its exempt/10 case 1.4 times slower and routes/10 1.1 times
    // (the same instructions, laid out otherwise).
    fn carry_out<B, ResBody>(
        &mut self,
        next: Next,
        parts: Parts,
        body: B,
    ) -> ResponseFuture<S::Future, ResBody, S::Error>
    where
        S: Service<Request<B>, Response = Response<ResBody>> + Send + 'static,
        S::Future: Send + 'static,
        B: Send + 'static,
        ResBody: Send + 'static,
    {
        match next {
            Next::Answer(response) => {
                ResponseFuture::ready(response.map(ResponseBody::layer_written))
            }
            Next::Call {
                disclosure,
                delay,
                after,
            } if delay.is_zero() => call_inner(&mut self.inner, parts, body, disclosure, after),
            next => {
                let inner = self.take_ready_inner();
                ResponseFuture::boxed(Box::pin(next.run(inner, parts, body)))
            }
        }
    }

    /// The service that `poll_ready` made ready, leaving a clone in its place: a boxed future
    /// that calls the inner service later must use the ready one.
    fn take_ready_inner(&mut self) -> S {
        let clone = self.inner.clone();
        std::mem::replace(&mut self.inner, clone)
    }
}

/// What is left to do once the request is decided: answer it, or call the inner service.
// Lives for one call on the stack, as `Conclusion` does: boxing the larger variant would cost an
// allocation per allowed request instead.
#[allow(clippy::large_enum_variant)]
enum Next {
    /// The layer's own response.
    Answer(Response<Bytes>),
    /// Call the inner service after `delay` (pacing), then show `disclosure` in its response;
    /// `after` is what the charges leave to that response.
    Call {
        disclosure: Disclosure,
        delay: Duration,
        after: Option<AfterResponse>,
    },
}

impl Next {
    /// Carries out `conclusion` up to the inner service: a refusal by an escalating rule
    /// records its strike; going ahead keeps what the charges leave to the response (holding
    /// concurrency slots from now on).
    fn of(
        conclusion: Conclusion,
        in_force: &InForce,
        settings: &Settings,
        rules: &RuleSet,
        plan: &Plan,
    ) -> Next {
        match conclusion {
            Conclusion::Respond {
                response,
                refused_by,
            } => {
                let refused = refused_by.and_then(|position| plan.rules(rules).nth(position));
                if let Some((planned, rule)) = refused {
                    strike::record_refusal(
                        &in_force.store,
                        rule,
                        &planned.key,
                        settings.key_logging,
                    );
                }
                Next::Answer(response)
            }
            Conclusion::Proceed {
                disclosure,
                delay,
                charges,
            } => Next::Call {
                disclosure,
                delay,
                after: after_response(in_force, charges),
            },
        }
    }

    /// Does it with the (ready) inner service, waiting out the delay first.
    async fn run<S, B, ResBody>(
        self,
        mut inner: S,
        parts: Parts,
        body: B,
    ) -> Result<Response<ResponseBody<ResBody>>, S::Error>
    where
        S: Service<Request<B>, Response = Response<ResBody>>,
    {
        match self {
            Next::Answer(response) => Ok(response.map(ResponseBody::layer_written)),
            Next::Call {
                disclosure,
                delay,
                after,
            } => {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                let response = inner.call(Request::from_parts(parts, body)).await?;
                Ok(finish(response, Some(disclosure), after))
            }
        }
    }
}

/// What `charges` leave to the response, if anything.
fn after_response(in_force: &InForce, charges: Charges) -> Option<AfterResponse> {
    if charges.is_empty() {
        return None;
    }
    Some(AfterResponse::new(charges, in_force.store.clone()))
}

fn call_inner<S, B, ResBody>(
    inner: &mut S,
    parts: Parts,
    body: B,
    disclosure: Disclosure,
    after: Option<AfterResponse>,
) -> ResponseFuture<S::Future, ResBody, S::Error>
where
    S: Service<Request<B>, Response = Response<ResBody>>,
{
    let future = inner.call(Request::from_parts(parts, body));
    ResponseFuture::inner(future, disclosure, after)
}

/// A store that must be awaited (a remote one): decide inside a boxed future, then call the
/// (ready) inner service.
fn call_after_store<S, B, ResBody>(
    inner: S,
    in_force: Arc<InForce>,
    settings: Arc<Settings>,
    rules: Arc<RuleSet>,
    plan: Plan,
    mut parts: Parts,
    body: B,
) -> ResponseFuture<S::Future, ResBody, S::Error>
where
    S: Service<Request<B>, Response = Response<ResBody>> + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
    ResBody: Send + 'static,
{
    ResponseFuture::boxed(Box::pin(async move {
        let conclusion = {
            let items = plan.items(&rules, settings.gateway);
            let answer = in_force.store.check(&items).await;
            conclude(&settings, &rules, &plan, &items, answer, &mut parts)
        };
        let next = Next::of(conclusion, &in_force, &settings, &rules, &plan);
        next.run(inner, parts, body).await
    }))
}
