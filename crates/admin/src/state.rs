//! What every admin handler shares.

use crate::changes::Changes;
use std::future::Future;
use std::pin::Pin;

use tollgate_tower::LayerHandle;

use crate::health::StoreReport;
use crate::session::Sessions;
use crate::token::Tokens;

/// A boxed future, as the store's health probe returns.
pub(crate) type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Probes the layer's store, as its own type knows how ([`StoreHealth`](crate::StoreHealth)).
pub(crate) type HealthProbe = Box<dyn Fn() -> Boxed<'static, StoreReport> + Send + Sync>;

pub(crate) struct State {
    /// The layer: its rules, stats, top refused callers and resets.
    pub(crate) layer: LayerHandle,
    pub(crate) health: HealthProbe,
    pub(crate) tokens: Tokens,
    pub(crate) sessions: Sessions,
    pub(crate) changes: Changes,
    /// The fleet's top refused callers, when configured.
    #[cfg(feature = "fleet")]
    pub(crate) fleet_top: Option<std::sync::Arc<tollgate_published::top::FleetTopRefused>>,
    /// Whether the session cookie is marked `Secure`.
    pub(crate) secure_cookie: bool,
    /// Held from reading the document in force to installing the changed one, so two changes
    /// on this gateway never lose one another.
    pub(crate) editing: tokio::sync::Mutex<()>,
}
