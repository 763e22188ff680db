//! What every admin handler shares.

use crate::changes::Changes;
use crate::limiter::Limiter;
use crate::session::Sessions;
use crate::token::Tokens;

pub(crate) struct State {
    pub(crate) limiter: Box<dyn Limiter>,
    pub(crate) tokens: Tokens,
    pub(crate) sessions: Sessions,
    pub(crate) changes: Changes,
    /// The fleet's top refused callers, when configured.
    #[cfg(feature = "fleet")]
    pub(crate) fleet_top: Option<std::sync::Arc<tollgate_fleet::top::FleetTopRefused>>,
    /// Whether the session cookie is marked `Secure`.
    pub(crate) secure_cookie: bool,
    /// Held from reading the document in force to installing the changed one, so two changes
    /// on this gateway never lose one another.
    pub(crate) editing: tokio::sync::Mutex<()>,
}
