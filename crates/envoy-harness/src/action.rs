//! One rate limit action: how Envoy makes one entry of a descriptor from a request.

use crate::yaml::scalar;

/// One action of a route's `rate_limits` entry (`envoy.config.route.v3.RateLimit.Action`):
/// each makes one `(key, value)` entry of the descriptor Envoy sends to the rate limit
/// service, in the order the actions are listed.
///
/// ```
/// use tollgate_envoy_harness::Action;
///
/// // The descriptor [("remote_address", "127.0.0.1"), ("generic_key", "api")]:
/// let per_caller = [Action::remote_address(), Action::generic_key("api")];
/// // [("plan", "gold")] — for a request without `x-plan`, no descriptor at all:
/// let per_plan = [Action::request_header("x-plan", "plan")];
/// # let _ = (per_caller, per_plan);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Action {
    /// `remote_address: {}` — the entry `("remote_address", <the downstream address>)`. The
    /// harness's listener trusts no `X-Forwarded-For` hop, so on loopback this is `127.0.0.1`.
    RemoteAddress,
    /// `generic_key` — the entry `(descriptor_key, descriptor_value)`, the key being
    /// `generic_key` when `descriptor_key` is `None`.
    GenericKey {
        /// The entry's value, the same for every request.
        descriptor_value: String,
        /// The entry's key; Envoy's default is `generic_key`.
        descriptor_key: Option<String>,
    },
    /// `request_headers` — the entry `(descriptor_key, <the header's value>)`. A request
    /// without the header makes no descriptor for its whole `rate_limits` entry (Envoy's
    /// `skip_if_absent: false`).
    RequestHeaders {
        /// The request header to read.
        header_name: String,
        /// The entry's key.
        descriptor_key: String,
    },
}

impl Action {
    /// [`Action::RemoteAddress`].
    pub fn remote_address() -> Self {
        Self::RemoteAddress
    }

    /// [`Action::GenericKey`] with Envoy's default key, `generic_key`.
    pub fn generic_key(descriptor_value: impl Into<String>) -> Self {
        Self::GenericKey {
            descriptor_value: descriptor_value.into(),
            descriptor_key: None,
        }
    }

    /// [`Action::GenericKey`] with a key of its own: the entry `(descriptor_key,
    /// descriptor_value)`.
    pub fn generic_entry(
        descriptor_key: impl Into<String>,
        descriptor_value: impl Into<String>,
    ) -> Self {
        Self::GenericKey {
            descriptor_value: descriptor_value.into(),
            descriptor_key: Some(descriptor_key.into()),
        }
    }

    /// [`Action::RequestHeaders`]: the value of `header_name` under `descriptor_key`.
    pub fn request_header(
        header_name: impl Into<String>,
        descriptor_key: impl Into<String>,
    ) -> Self {
        Self::RequestHeaders {
            header_name: header_name.into(),
            descriptor_key: descriptor_key.into(),
        }
    }

    /// The action as one flow mapping, the way it reads in a list of actions:
    /// `generic_key: {descriptor_value: api}`.
    pub(crate) fn to_yaml(&self) -> String {
        match self {
            Self::RemoteAddress => "remote_address: {}".to_owned(),
            Self::GenericKey {
                descriptor_value,
                descriptor_key,
            } => {
                let key = descriptor_key
                    .as_deref()
                    .map(|key| format!(", descriptor_key: {}", scalar(key)))
                    .unwrap_or_default();
                format!(
                    "generic_key: {{descriptor_value: {}{key}}}",
                    scalar(descriptor_value)
                )
            }
            Self::RequestHeaders {
                header_name,
                descriptor_key,
            } => format!(
                "request_headers: {{header_name: {}, descriptor_key: {}}}",
                scalar(header_name),
                scalar(descriptor_key)
            ),
        }
    }
}
