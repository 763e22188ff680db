//! tollgate's admin API and status page: see and steer a running limiter.
//!
//! [`Admin`] builds an axum [`Router`](axum::Router) the service mounts where it wants (behind
//! its own network policy: the admin port, [`Admin::router`], or a path only operators reach,
//! [`Admin::router_at`]). The routes, relative to that mount point:
//!
//! | route | what it does |
//! |---|---|
//! | `GET /v1/rules` | the rules in force as the rule file would write them, each with its source, and the versions |
//! | `GET /v1/rules/{id}` | one rule |
//! | `PUT /v1/rules/{id}` | replaces a rule: the body is the rule as TOML (what `GET` gives), or with `Content-Type: application/json` a JSON object of the same fields (written as that `[[rule]]` table), checked exactly as a rule file is |
//! | `PATCH /v1/rules/{id}` | changes a rule's quota fields, `mode` or `on_store_failure` (a JSON object of at least one of them, and no others) |
//! | `DELETE /v1/rules/{id}/change` | withdraws this API's change to a rule: the rule file's version is back (the change is what is deleted; the rule stays, unless only the change made it) |
//! | `GET /v1/rules/{id}/stats` | checks and refusals since start, over the last 5 minutes and hour, per minute, and the top refused callers (`?top=` 1–100, default 10) |
//! | `POST /v1/rules/{id}/reset` | forgets what the rule counted for one caller, named by value (`{"key": "2001:db8::1"}`); `409` for a rule whose key is built by code from requests, which no value names |
//! | `GET /v1/health` | the store (reachable, breaker), the rules' versions, the last config error, the rules alerting near their limit (`alert_at`) |
//! | `GET /v1/openapi.json` | this API as an OpenAPI 3.1 document |
//! | `GET /` | the status page for the person on call (HTML, refreshes itself); mounted at `/admin`, it answers at `/admin` and `/admin/` |
//! | `POST /login`, `POST /logout` | the status page's session cookie |
//!
//! **Authentication.** Every route but the login form needs a named token
//! ([`AdminToken`]): `Authorization: Bearer <token>`. Only SHA-256 digests of tokens are
//! kept, compared in constant time. A missing or wrong token is answered `401` with
//! `WWW-Authenticate` and logged at `warn` (target `tollgate::admin`) without the token. The
//! status page (`GET /`) also takes HTTP Basic (any user, the token as password) or a session
//! cookie (`HttpOnly`, `SameSite=Strict`, `Secure` unless [`Admin::insecure_cookie`]) that
//! `POST /login` exchanges for a token; the cookie opens the page and nothing else, so writes
//! need the bearer header. There is no way to build the router without a token.
//!
//! **Changes** are logged at `info` (target `tollgate::admin`) with the token's name, the rule
//! and the rule before and after. They are checked exactly as a rule file is (`422` with each
//! mistake's line and column when not) and put over the watched rule file as one document — on
//! this gateway, or, with [`Admin::fleet`], published to every gateway through Redis. The
//! precedence: **a changed rule stays changed when the rule file is reloaded**; the file's
//! edits to that rule wait until the change is withdrawn (`DELETE /v1/rules/{id}/change`),
//! while its other rules reload as usual. So a limit loosened during an incident is not undone
//! by a deploy, and going back to the file is one explicit request.
//!
//! **Answers** are what the OpenAPI document lists, and the tests hold the server to it with a
//! property-based fuzzer (schemathesis) against a live router. Every error is a JSON body
//! (`{"error": "...", "errors": [{"file", "line", "column", "message"}], "document"?}`): `400`
//! for a request not of the documented shape (a body of other fields, a `null`, `top` outside
//! 1–100); `422` for one of that shape the rule file's checks refuse, each mistake located (in
//! `document` when it is not the body as sent: a `PATCH` merged into the rule, a JSON rule
//! written as TOML), or reset values that name no caller of the rule's key; `409` for what
//! cannot be done here (rules built in code, a fleet document in force, a key no value
//! names); `404` for no such rule or change; `405` with `Allow` for a method a path does not
//! take; `413` for a body over 64 KiB; `415` for a login that is not a form.
//!
//! **What it sees**: the layer's rules. Typed limits in handlers (`[[limit]]` tables) appear in
//! the listed rule file but are not rows of `/v1/rules`, have no stats and cannot be reset or
//! patched here (change them in the rule file). Stats count each rule's decisions since the
//! rule was installed (a reload that keeps the rule keeps them); while the store fails, a
//! request counts as its rule's failure policy answers it.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use tollgate_admin::{Admin, AdminToken};
//! use tollgate_core::MemoryStore;
//! use tollgate_tower::RateLimitLayer;
//! use tollgate_config::{Extractors, RuleWatcher};
//!
//! let layer = RateLimitLayer::new(MemoryStore::new()).track_top_refused(100);
//! let watcher = RuleWatcher::start("rules.toml", Extractors::new(), &layer)?;
//! let token = AdminToken::new("on-call", std::env::var("ADMIN_TOKEN")?)?;
//! let admin = Admin::new(&layer, token).rule_file(&watcher).router_at("/admin");
//! let app = axum::Router::new()
//!     .route("/", axum::routing::get(|| async { "hello" }))
//!     .layer(layer)
//!     .merge(admin);
//! # let _ = app;
//! # Ok(()) }
//! ```
//!
//! The guide's chapter *The admin API and the status page* (`docs/guide/src/admin.md`) in the
//! repository shows it at work, task by task.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod auth;
mod bodies;
mod changes;
mod error;
mod handlers;
mod health;
mod json_toml;
mod openapi;
mod page;
mod report;
mod router;
mod session;
mod state;
mod token;
mod views;
pub mod words;

use std::sync::Arc;

use tollgate_config::RuleWatcher;
use tollgate_core::Store;
use tollgate_tower::RateLimitLayer;

pub use health::{StoreHealth, StoreReport, probe};
pub use openapi::openapi_json;
pub use token::{AdminToken, MIN_SECRET_BYTES, TokenError};

use crate::changes::Changes;
use crate::session::Sessions;
use crate::state::State;
use crate::token::Tokens;

/// Builds the admin router for one layer: [`Admin::new`] with the first token, then what it
/// should see and change.
#[must_use]
pub struct Admin {
    state: State,
}

impl Admin {
    /// The admin API of `layer` (the layer value the service is built with, or a clone),
    /// accepting `token`. Turns on the layer's per-rule counters
    /// ([`RateLimitLayer::track_stats`]); the top refused callers show when the layer tracks
    /// them ([`RateLimitLayer::track_top_refused`]).
    pub fn new<St: Store + StoreHealth>(layer: &RateLimitLayer<St>, token: AdminToken) -> Admin {
        let layer = layer.clone().track_stats();
        let handle = layer.handle();
        let health: state::HealthProbe = Box::new(move || {
            let layer = layer.clone();
            Box::pin(async move { layer.store().health().await })
        });
        Admin {
            state: State {
                layer: handle,
                health,
                tokens: Tokens::new(token),
                sessions: Sessions::default(),
                changes: Changes::Fixed,
                #[cfg(feature = "fleet")]
                fleet_top: None,
                secure_cookie: true,
                editing: tokio::sync::Mutex::new(()),
            },
        }
    }

    /// Accepts another token (each person or tool its own, so logs say who did what).
    pub fn token(mut self, token: AdminToken) -> Admin {
        self.state.tokens.add(token);
        self
    }

    /// Lets the API change rules: changes go over `watcher`'s rule file on this gateway (see
    /// the crate docs for the precedence). Without it, rules are read-only (`409`). Build one
    /// admin router per watcher (serve it on as many listeners as you like): changes are
    /// serialised per router.
    pub fn rule_file(mut self, watcher: &RuleWatcher) -> Admin {
        self.state.changes = Changes::local(watcher.overlay());
        self
    }

    /// Sends changes to every gateway: published as the fleet document `fleet` follows (over
    /// `watcher`'s rule file, the one `fleet` was given the overlay of) (feature `fleet`).
    #[cfg(feature = "fleet")]
    pub fn fleet(
        mut self,
        watcher: &RuleWatcher,
        fleet: Arc<tollgate_published::PublishedRules>,
    ) -> Admin {
        self.state.changes = Changes::Fleet {
            overlay: watcher.overlay(),
            fleet,
        };
        self
    }

    /// Answers the top refused callers for the whole fleet, as `top` reports them (feature
    /// `fleet`).
    #[cfg(feature = "fleet")]
    pub fn fleet_top_refused(
        mut self,
        top: Arc<tollgate_published::top::FleetTopRefused>,
    ) -> Admin {
        self.state.fleet_top = Some(top);
        self
    }

    /// Leaves `Secure` off the status page's cookie, for an admin port served over plain HTTP
    /// (browsers send `Secure` cookies only over HTTPS, and to `localhost`).
    pub fn insecure_cookie(mut self) -> Admin {
        self.state.secure_cookie = false;
        self
    }

    /// The router, its routes at the root: serve it on a port of its own (or see
    /// [`Admin::router_at`] to mount it under a path of the service's).
    pub fn router(self) -> axum::Router {
        router::router(Arc::new(self.state))
    }

    /// The router with every route under `path` (`"/admin"`), to merge into the service's:
    /// `app.merge(admin.router_at("/admin"))`. The status page answers at `/admin` and
    /// `/admin/` — the second is what the OpenAPI document's `/` names under that mount point,
    /// and `Router::nest` would leave it to the service's fallback (a `404`). A trailing slash
    /// on `path` is dropped; `""` or `"/"` is [`Admin::router`].
    ///
    /// # Panics
    ///
    /// When `path` is not a path axum can nest at (as `Router::nest` does): one that does not
    /// start with `/`, or holds a wildcard (`{*rest}`).
    pub fn router_at(self, path: &str) -> axum::Router {
        router::router_at(Arc::new(self.state), path)
    }
}

impl std::fmt::Debug for Admin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admin").finish_non_exhaustive()
    }
}
