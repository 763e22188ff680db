//! Work off the request path: background jobs (top-ups, give-backs, pushes) and their count,
//! the ticker that ends leases and pushes due keys, and settling before a gateway stops.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::store::{FleetStore, Inner};
use tollgate_core::{Clock, Store};

/// Background work to await here, when there is no runtime to spawn it on.
pub(super) type Job = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

impl<S: Store, C: Clock + Clone> FleetStore<S, C> {
    /// Ends what is due now: leases past their lifetime or window give back their unspent
    /// units, keys quiet for two top-up periods give back everything, and synced keys due a
    /// push are pushed (one batch).
    pub async fn tick(&self) {
        let ended = self.inner.leases.end_quiet(self.inner.clock.now());
        self.inner.give_back(ended).await;
        self.inner.push(None).await;
    }

    /// Waits until no top-up, give-back or push started in the background is still running
    /// (for tests, and for a gateway stopping: then [`give_back`](Self::give_back)).
    pub async fn background_done(&self) {
        loop {
            let idle = self.inner.idle.notified();
            if self.inner.background.load(Ordering::Acquire) == 0 {
                return;
            }
            idle.await;
        }
    }

    /// Gives back every lease and pushes every unsynced unit now: call it before a gateway stops.
    pub async fn give_back(&self) {
        self.background_done().await;
        let held = self.inner.leases.end_all();
        self.inner.give_back(held).await;
        self.inner.push(None).await;
    }

    /// Runs [`tick`](Self::tick) every `every` on the current Tokio runtime, until this store
    /// and its clones are dropped. Must be called inside a runtime.
    pub fn spawn_ticker(&self, every: Duration) -> tokio::task::JoinHandle<()>
    where
        S: 'static,
        C: 'static,
    {
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(every.max(Duration::from_millis(1)));
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                interval.tick().await;
                let Some(inner) = weak.upgrade() else { return };
                let store = FleetStore { inner };
                store.tick().await;
                #[cfg(feature = "metrics")]
                {
                    store.publish_metrics();
                    store.blocked().publish_metrics();
                }
            }
        })
    }
}

impl<S: Store, C: Clock + Clone> Inner<S, C> {
    /// Spawns `job` on the current Tokio runtime; without one, answers it (boxed) for the caller
    /// to await. Counted while it runs, for [`FleetStore::background_done`].
    pub(super) fn start(
        self: &Arc<Self>,
        job: impl Future<Output = ()> + Send + 'static,
    ) -> Option<Job> {
        self.background.fetch_add(1, Ordering::AcqRel);
        // Counted down however the job ends, even dropped before it first ran.
        let done = {
            let inner = Arc::clone(self);
            super::on_drop::OnDrop::new(move || {
                if inner.background.fetch_sub(1, Ordering::AcqRel) == 1 {
                    inner.idle.notify_waiters();
                }
            })
        };
        let counted = async move {
            job.await;
            drop(done);
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                drop(runtime.spawn(counted));
                None
            }
            Err(_) => Some(Box::pin(counted)),
        }
    }
}
