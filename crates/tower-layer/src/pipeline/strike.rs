//! Recording an escalating rule's refusal: one strike, and a block once the strikes run out
//! (what the strikes and the block are: [`Escalation`](crate::Escalation)).

use std::future::Future;
use std::task::{Context, Waker};

use tollgate_core::{DynStore, FleetModes, Item, Key, OnStoreFailure, Store, StoreError};

use crate::observe::key_logging::KeyLogging;
use crate::rules::escalation::Escalated;
use crate::rules::rule::Rule;

/// Records a refusal of `key` by `rule`: one strike, and a block once the strikes run out.
/// The same future is polled once here and, if the store cannot answer at once, finished in a
/// spawned task, so a strike is never sent twice.
pub(crate) fn record_refusal(store: &DynStore, rule: &Rule, key: &Key, logging: KeyLogging) {
    let Some(escalated) = rule.escalation.clone() else {
        return;
    };
    let (store, key, policy) = (store.clone(), key.clone(), rule.on_store_failure);
    let home = rule.store.clone();
    let mut recording = Box::pin(async move {
        let counted = Counted {
            policy,
            store: home.as_deref(),
        };
        if let Err(error) = strike(&store, &escalated, &key, counted, logging).await {
            log_failure(&escalated, &error);
        }
    });
    let first_poll = recording
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()));
    if first_poll.is_pending() {
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn(recording)),
            Err(_) => tracing::warn!(
                target: "tollgate::store",
                "no tokio runtime to finish recording an escalation strike on"
            ),
        }
    }
}

/// Where and how an escalating rule's strikes and block are counted: under the rule's own
/// failure plan, in the store the rule names.
#[derive(Clone, Copy)]
struct Counted<'a> {
    policy: OnStoreFailure,
    store: Option<&'a str>,
}

impl Counted<'_> {
    fn apply<'i>(&self, item: Item<'i>) -> Item<'i>
    where
        Self: 'i,
    {
        item.with_store_failure(self.policy)
            .with_fleet_modes(FleetModes::new().with_store(self.store))
    }
}

/// Charges a strike and, once the strikes run out, the block; both under the rule's own failure
/// plan (so a gateway counting locally through an outage blocks locally too) and in the rule's
/// own store (a home region's strikes and block live beside its count, where the request's
/// read of the block looks).
async fn strike<St: Store>(
    store: &St,
    escalated: &Escalated,
    key: &Key,
    counted: Counted<'_>,
    logging: KeyLogging,
) -> Result<(), StoreError> {
    let strike = counted.apply(escalated.strike(key));
    let strike = store.check_one(&strike).await?;
    if !strike.decision().is_allowed() {
        let block = counted.apply(escalated.block(key));
        store.check_one(&block).await?;
        tracing::warn!(
            target: "tollgate::refusal",
            rule = %escalated.block_rule,
            key = %logging.show(key),
            "caller kept sending after refusals and is blocked"
        );
    }
    Ok(())
}

fn log_failure(escalated: &Escalated, error: &StoreError) {
    tracing::warn!(
        target: "tollgate::store",
        rule = %escalated.strikes_rule,
        error = %error,
        "could not record a strike for escalation"
    );
}
