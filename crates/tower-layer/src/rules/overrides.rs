//! Quotas for particular callers of one rule: a partner's contract, a paid plan.

use std::collections::HashMap;
use std::sync::Arc;

use http::request::Parts;
use tollgate_core::{Key, Quota};

use tollgate_key::KeyExtractor;

/// The quotas a rule gives particular callers instead of its own: by the caller's key (a
/// partner's API key, under contract for more), or by the caller's plan, which another
/// extractor reads from the request (an extension the auth middleware sets). Resolved per
/// request: the caller's own entry first, then its plan's, then the rule's quota (or its live
/// entry in the layer's [`QuotaRegistry`](crate::QuotaRegistry)).
///
/// Each caller's count is its own whichever quota it gets; a caller that moves to another plan
/// keeps its state, read in the new quota's terms (a change of algorithm family starts it
/// afresh). Entries are matched on the whole key, so give a rule whose key combines several
/// parts entries of as many parts ([`Key::from_parts`]).
///
/// ```
/// use std::time::Duration;
/// use tollgate_core::{Key, Quota, Rate};
/// use tollgate_tower::key::{ExtensionKey, HeaderKey};
/// use tollgate_tower::{QuotaOverrides, Rule};
///
/// #[derive(Clone)]
/// struct Plan(&'static str);
///
/// let partners = Rule::new(
///     "partner-api",
///     Quota::token_bucket(200, Rate::per_second(200))?,
///     HeaderKey::new(http::HeaderName::from_static("x-api-key")),
/// )?
/// .overrides(
///     QuotaOverrides::new()
///         .key(Key::new("partner-acme"), Quota::token_bucket(500, Rate::per_second(500))?)
///         .plans(
///             ExtensionKey::new(|plan: &Plan| plan.0),
///             [("enterprise", Quota::token_bucket(1000, Rate::per_second(1000))?)],
///         ),
/// );
/// # let _ = partners;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Default)]
pub struct QuotaOverrides {
    by_key: HashMap<Key, Quota>,
    plan: Option<PlanQuotas>,
}

#[derive(Clone)]
struct PlanQuotas {
    extractor: Arc<dyn KeyExtractor>,
    /// Each plan's quota by its name as a key, and the name as written (to show it).
    quotas: HashMap<Key, (Arc<str>, Quota)>,
}

impl QuotaOverrides {
    /// No entries.
    pub fn new() -> Self {
        QuotaOverrides::default()
    }

    /// The caller whose key is `key` gets `quota`.
    #[must_use]
    pub fn key(mut self, key: Key, quota: Quota) -> Self {
        self.by_key.insert(key, quota);
        self
    }

    /// Callers whose plan — what `plan` extracts from the request, as one key part — is one of
    /// `quotas`' names get that quota. Replaces earlier plans. `plan` may be an
    /// `Arc<dyn KeyExtractor>` shared with rules; it is kept as it is.
    #[must_use]
    pub fn plans<'a>(
        mut self,
        plan: impl KeyExtractor,
        quotas: impl IntoIterator<Item = (&'a str, Quota)>,
    ) -> Self {
        self.plan = Some(PlanQuotas {
            extractor: tollgate_key::shared(plan),
            quotas: quotas
                .into_iter()
                .map(|(name, quota)| (Key::new(name), (Arc::from(name), quota)))
                .collect(),
        });
        self
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty() && self.plan.as_ref().is_none_or(|plan| plan.quotas.is_empty())
    }

    /// Every quota an entry names (to check a cost against each).
    pub fn quotas(&self) -> impl Iterator<Item = &Quota> {
        self.by_key.values().chain(
            self.plan
                .iter()
                .flat_map(|plan| plan.quotas.values().map(|(_, quota)| quota)),
        )
    }

    /// The callers with quotas of their own, by key, in no particular order (to show them:
    /// the admin status page says each one in words).
    ///
    /// ```
    /// use tollgate_core::{Key, Quota};
    /// use tollgate_tower::QuotaOverrides;
    ///
    /// let overrides = QuotaOverrides::new().key(Key::new("partner-acme"), Quota::concurrency(5)?);
    /// let entries: Vec<_> = overrides.by_key().collect();
    /// assert_eq!(entries, [(&Key::new("partner-acme"), &Quota::concurrency(5)?)]);
    /// # Ok::<(), tollgate_core::QuotaError>(())
    /// ```
    pub fn by_key(&self) -> impl Iterator<Item = (&Key, &Quota)> {
        self.by_key.iter()
    }

    /// The plans with quotas of their own, by the name [`plans`](Self::plans) was given, in no
    /// particular order.
    ///
    /// ```
    /// use tollgate_core::Quota;
    /// use tollgate_tower::{QuotaOverrides, key::HeaderKey};
    ///
    /// let plan = HeaderKey::new(http::HeaderName::from_static("x-plan"));
    /// let overrides = QuotaOverrides::new().plans(plan, [("pro", Quota::concurrency(5)?)]);
    /// let entries: Vec<_> = overrides.by_plan().collect();
    /// assert_eq!(entries, [("pro", &Quota::concurrency(5)?)]);
    /// # Ok::<(), tollgate_core::QuotaError>(())
    /// ```
    pub fn by_plan(&self) -> impl Iterator<Item = (&str, &Quota)> {
        self.plan.iter().flat_map(|plan| {
            plan.quotas
                .values()
                .map(|(name, quota)| (name.as_ref(), quota))
        })
    }

    /// The quota of the caller `key` names in `request`, if an entry covers it.
    pub(crate) fn resolve(&self, key: &Key, request: &Parts) -> Option<Quota> {
        if let Some(quota) = self.by_key.get(key) {
            return Some(*quota);
        }
        let plan = self.plan.as_ref()?;
        let mut name = Key::builder();
        if !plan.extractor.extract(request, &mut name) {
            return None;
        }
        plan.quotas.get(&name.build()).map(|(_, quota)| *quota)
    }
}

impl std::fmt::Debug for QuotaOverrides {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuotaOverrides")
            .field("keys", &self.by_key.len())
            .field(
                "plans",
                &self.plan.as_ref().map_or(0, |plan| plan.quotas.len()),
            )
            .finish()
    }
}
