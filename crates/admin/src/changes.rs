//! Where a rule change goes: this gateway's rules (over its rule file), or the fleet document
//! every gateway follows.
//!
//! Either way a change is a document put over the rule file (the watcher's overlay), so the
//! precedence is the overlay's: a changed rule stays as changed when the file is reloaded, and
//! edits to that rule in the file wait until the change is withdrawn (`DELETE /v1/rules/{id}`).

use tollgate_tower::config::{ConfigErrors, RuleFile, RuleOverlay};

/// The prefix of the versions this API gives changes kept on one gateway.
pub(crate) const LOCAL_VERSION: &str = "admin-";

/// Where changes go.
pub(crate) enum Changes {
    /// Nowhere: the layer's rules are code (no rule file watched).
    Fixed,
    /// This gateway's overlay.
    Local(RuleOverlay),
    /// The fleet document, through Redis.
    #[cfg(feature = "fleet")]
    Fleet {
        overlay: RuleOverlay,
        fleet: std::sync::Arc<tollgate_redis::fleet::FleetRules>,
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
}

impl Changes {
    /// The overlay, when rules come from a file.
    pub(crate) fn overlay(&self) -> Option<&RuleOverlay> {
        match self {
            Changes::Fixed => None,
            Changes::Local(overlay) => Some(overlay),
            #[cfg(feature = "fleet")]
            Changes::Fleet { overlay, .. } => Some(overlay),
        }
    }

    /// The document changes build on (`None`: no change in force).
    pub(crate) fn base(&self) -> Result<Option<RuleFile>, ChangeError> {
        match self {
            Changes::Fixed => Err(ChangeError::Conflict(
                "this gateway's rules are built in code; watch a rule file (`RuleWatcher`) and give it to the admin API (`Admin::rule_file`) to change rules at runtime".to_owned(),
            )),
            Changes::Local(overlay) => match overlay.version() {
                Some(version) if !version.starts_with(LOCAL_VERSION) => Err(ChangeError::Conflict(format!(
                    "a fleet document (version {version}) is in force on this gateway; give the admin API the fleet (`Admin::fleet`) so a change reaches every gateway"
                ))),
                _ => Ok(overlay.document()),
            },
            #[cfg(feature = "fleet")]
            Changes::Fleet { overlay, .. } => Ok(overlay.document()),
        }
    }

    /// Puts `document` in force over the rule file (an empty one withdraws every change);
    /// the version it got.
    pub(crate) async fn install(&self, document: &RuleFile) -> Result<String, ChangeError> {
        let text = document.to_toml();
        match self {
            Changes::Fixed => Err(ChangeError::Conflict("no rule file to change".to_owned())),
            Changes::Local(overlay) => {
                if document.is_empty() {
                    overlay.clear();
                    return Ok(String::new());
                }
                let version = format!("{LOCAL_VERSION}{}", unix_millis());
                overlay
                    .apply(&version, &text)
                    .map_err(ChangeError::Invalid)?;
                Ok(version)
            }
            #[cfg(feature = "fleet")]
            Changes::Fleet { fleet, .. } => {
                use tollgate_redis::fleet::PublishError;
                let published = if document.is_empty() {
                    fleet.withdraw().await
                } else {
                    fleet.publish(&text).await
                };
                match published {
                    Ok(version) => Ok(version.to_string()),
                    Err(PublishError::Invalid(errors)) => Err(ChangeError::Invalid(errors)),
                    Err(other) => Err(ChangeError::Unavailable(other.to_string())),
                }
            }
        }
    }
}

fn unix_millis() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_millis())
}
