//! Layer-wide settings: headers, the responder hook, exemptions, how keys appear in events,
//! live quotas, this gateway's number.

use std::time::Duration;

use crate::headers::HeaderStyle;
use crate::headers::refused::Responder;
use crate::observe::key_logging::KeyLogging;
use crate::rules::exemptions::Exemptions;
use crate::rules::registry::QuotaRegistry;

/// Everything layer-wide that is not the store or the rules.
#[derive(Clone)]
pub(crate) struct Settings {
    pub(crate) header_style: HeaderStyle,
    pub(crate) responder: Option<Responder>,
    pub(crate) key_logging: KeyLogging,
    pub(crate) unavailable_retry_after: Duration,
    pub(crate) exemptions: Exemptions,
    pub(crate) registry: Option<QuotaRegistry>,
    /// This gateway's number, for split rules' parts.
    pub(crate) gateway: Option<u32>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            header_style: HeaderStyle::default(),
            responder: None,
            key_logging: KeyLogging::default(),
            unavailable_retry_after: Duration::from_secs(1),
            exemptions: Exemptions::default(),
            registry: None,
            gateway: None,
        }
    }
}
