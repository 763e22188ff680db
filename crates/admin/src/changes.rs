//! Where a rule change goes: this gateway's rules (over its rule file), or the fleet document
//! every gateway follows.
//!
//! Either way a change is a document put over the rule file (the watcher's overlay), so the
//! precedence is the overlay's: a changed rule stays as changed when the file is reloaded, and
//! edits to that rule in the file wait until the change is withdrawn (`DELETE /v1/rules/{id}`).

use std::sync::atomic::{AtomicU64, Ordering};

use tollgate_config::{ConfigErrors, RuleFile, RuleOverlay};

/// The prefix of the versions this API gives changes kept on one gateway.
pub(crate) const LOCAL_VERSION: &str = "admin-";

/// Where changes go.
pub(crate) enum Changes {
    /// Nowhere: the layer's rules are code (no rule file watched).
    Fixed,
    /// This gateway's overlay; `last` is the newest version given (versions only rise).
    Local {
        overlay: RuleOverlay,
        last: AtomicU64,
    },
    /// The fleet document, through Redis.
    #[cfg(feature = "fleet")]
    Fleet {
        overlay: RuleOverlay,
        fleet: std::sync::Arc<tollgate_published::PublishedRules>,
    },
}

/// Why a change was not made.
#[derive(Debug)]
pub(crate) enum ChangeError {
    /// The rules have mistakes.
    Invalid(ConfigErrors),
    /// This gateway cannot make changes of this kind (409).
    Conflict(String),
    /// The fleet store failed (503).
    #[cfg_attr(not(feature = "fleet"), allow(dead_code))]
    Unavailable(String),
    /// The fleet document changed since this gateway read it: build the change again.
    #[cfg_attr(not(feature = "fleet"), allow(dead_code))]
    Stale,
}

/// The document of changes in force, and the version it was read at.
pub(crate) struct Base {
    /// The document (`None`: no change in force).
    pub(crate) document: Option<RuleFile>,
    /// The fleet version it came with (`None`: none ever, or not a fleet).
    #[cfg_attr(not(feature = "fleet"), allow(dead_code))]
    fleet_version: Option<u64>,
}

impl Changes {
    /// Changes over `overlay`, on this gateway only.
    pub(crate) fn local(overlay: RuleOverlay) -> Changes {
        Changes::Local {
            overlay,
            last: AtomicU64::new(0),
        }
    }

    /// The overlay, when rules come from a file.
    pub(crate) fn overlay(&self) -> Option<&RuleOverlay> {
        match self {
            Changes::Fixed => None,
            Changes::Local { overlay, .. } => Some(overlay),
            #[cfg(feature = "fleet")]
            Changes::Fleet { overlay, .. } => Some(overlay),
        }
    }

    /// The document changes build on.
    pub(crate) fn base(&self) -> Result<Base, ChangeError> {
        match self {
            Changes::Fixed => Err(ChangeError::Conflict(
                "this gateway's rules are built in code; watch a rule file (`RuleWatcher`) and give it to the admin API (`Admin::rule_file`) to change rules at runtime".to_owned(),
            )),
            Changes::Local { overlay, .. } => match overlay.version() {
                Some(version) if !version.starts_with(LOCAL_VERSION) => Err(ChangeError::Conflict(format!(
                    "a fleet document (version {version}) is in force on this gateway; give the admin API the fleet (`Admin::fleet`) so a change reaches every gateway"
                ))),
                _ => Ok(Base {
                    document: overlay.document(),
                    fleet_version: None,
                }),
            },
            #[cfg(feature = "fleet")]
            Changes::Fleet { overlay, fleet } => loop {
                let status = fleet.status();
                if let Some((version, why)) = status.refused {
                    break Err(ChangeError::Conflict(format!(
                        "this gateway refused the fleet document version {version} ({why}); changes made here would build on rules the fleet does not have: fix that first (see GET /v1/health)"
                    )));
                }
                // A document is applied before its version is recorded: a pair read between
                // two equal readings of the version is never older than that version.
                let document = overlay.document();
                if fleet.status().version != status.version {
                    continue;
                }
                // The key lost in Redis (a flush, a failover to an empty replica): the document
                // in force here is the newest there is; build on it over nothing.
                let lost = status.in_redis.is_none();
                break Ok(Base {
                    document,
                    fleet_version: if lost { None } else { status.version },
                });
            },
        }
    }

    /// Puts `document` in force over the rule file in place of `base` (an empty document
    /// withdraws every change); the version it got. A refused change leaves no trace in the
    /// status.
    pub(crate) async fn install(
        &self,
        base: &Base,
        document: &RuleFile,
    ) -> Result<String, ChangeError> {
        let text = document.to_toml();
        match self {
            Changes::Fixed => Err(ChangeError::Conflict("no rule file to change".to_owned())),
            Changes::Local { overlay, last } => {
                let _ = base;
                if document.is_empty() {
                    overlay.clear();
                    return Ok(String::new());
                }
                let now = unix_millis();
                let version = last
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |last| {
                        Some(now.max(last + 1))
                    })
                    .map_or(now, |last| now.max(last + 1));
                let version = format!("{LOCAL_VERSION}{version}");
                overlay
                    .apply_requested(&version, &text)
                    .map_err(ChangeError::Invalid)?;
                Ok(version)
            }
            #[cfg(feature = "fleet")]
            Changes::Fleet { fleet, .. } => {
                use tollgate_published::PublishError;
                let text = if document.is_empty() {
                    String::new()
                } else {
                    text
                };
                match fleet.publish_over(base.fleet_version, &text).await {
                    Ok(version) => Ok(version.to_string()),
                    Err(PublishError::Invalid(errors)) => Err(ChangeError::Invalid(errors)),
                    Err(PublishError::Stale { .. }) => Err(ChangeError::Stale),
                    Err(other) => Err(ChangeError::Unavailable(other.to_string())),
                }
            }
        }
    }

    /// Reads the fleet document again (after [`ChangeError::Stale`]).
    pub(crate) async fn refresh(&self) {
        #[cfg(feature = "fleet")]
        if let Changes::Fleet { fleet, .. } = self {
            fleet.refresh().await;
        }
    }
}

fn unix_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}
