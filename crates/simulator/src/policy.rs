//! What is scored: a limiting policy, as a rule file for Chirp's gateway.

use std::path::Path;
use std::time::Duration;

use tollgate::config::RuleFile;
use tollgate::tower::{QuotaRegistry, RateLimitLayer};
use tollgate::{OnStoreFailure, Quota, RuleId, Store};

use crate::Error;

/// Chirp's layered limits, as the gateway reads them.
const CHIRP_RULES: &str = include_str!("../../../examples/rules/chirp.toml");

/// A limiting policy: a rule file for Chirp's gateway (rules, `[[limit]]` quotas for the typed
/// limits in its handlers, headers, exemptions).
///
/// A typed limit the file sets no quota for is off in the simulation (the gateway itself
/// refuses to start without one), so "no limits" and "one per-IP limit" mean exactly that.
///
/// ```
/// use tollgate_simulator::Policy;
///
/// let layered = Policy::layered()?;
/// assert_eq!(layered.name(), "layered");
/// assert!(Policy::per_ip(100)?.rules_toml().contains("limit = 100"));
/// # Ok::<(), tollgate_simulator::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Policy {
    name: String,
    kind: PolicyKind,
    /// `None`: no limits at all (a rule file cannot say that: an empty one is refused).
    file: Option<RuleFile>,
}

/// Which policy a [`Policy`] is, for what the simulator's story
/// ([`story_notes`](crate::story_notes)) says of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyKind {
    /// No limits at all.
    None,
    /// A single per-IP limit.
    PerIp,
    /// Chirp's layered limits (`examples/rules/chirp.toml`).
    Layered,
    /// A rule file given on the command line.
    File,
}

impl Policy {
    /// No limits at all.
    pub fn none() -> Result<Policy, Error> {
        Ok(Policy {
            name: "none".to_owned(),
            kind: PolicyKind::None,
            file: None,
        })
    }

    /// A single limit of `per_minute` requests a minute per client address (a fixed window),
    /// on every route: the naive limit, which the story expects to let a distributed wave
    /// through and to block a crowd behind one NAT.
    pub fn per_ip(per_minute: u64) -> Result<Policy, Error> {
        let text = format!(
            "[[rule]]\nid = \"per-ip\"\nalgorithm = \"fixed_window\"\nlimit = {per_minute}\n\
             window = \"1m\"\nkey = \"peer_ip\"\n"
        );
        Policy::parse("per-ip", PolicyKind::PerIp, "per-ip", &text)
    }

    /// Chirp's layered limits, from `examples/rules/chirp.toml` (built into the simulator).
    pub fn layered() -> Result<Policy, Error> {
        Policy::parse(
            "layered",
            PolicyKind::Layered,
            "examples/rules/chirp.toml",
            CHIRP_RULES,
        )
    }

    /// The rule file at `path`, named by the path as given (two files of one name in
    /// different folders stay apart in the table, the CSV and the charts).
    pub fn from_file(path: &Path) -> Result<Policy, Error> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|error| Error::Read {
            path: shown.clone(),
            error,
        })?;
        Policy::parse(&shown, PolicyKind::File, &shown, &text)
    }

    fn parse(name: &str, kind: PolicyKind, path: &str, text: &str) -> Result<Policy, Error> {
        let file = RuleFile::parse(path, text, &chirp::extractors()).map_err(Error::Rules)?;
        let policy = Policy {
            name: name.to_owned(),
            kind,
            file: Some(file),
        };
        // A `[[limit]]` that no handler checks is a typo the gateway would catch by refusing to
        // start without the limit meant.
        let typed: Vec<&str> = chirp::typed_limits().iter().map(|(id, _)| *id).collect();
        if let Some((id, _)) = policy
            .limits()
            .find(|(id, _)| !typed.contains(&id.as_str()))
        {
            return Err(Error::Chirp(format!(
                "{path}: no Chirp handler checks a limit {:?}; its typed limits are {}",
                id.as_str(),
                typed.join(", ")
            )));
        }
        // As the gateway: a handler's typed limit takes its quota from a `[[limit]]`; a
        // `[[rule]]` of the same id would have its quota replaced by the limit's.
        for (id, _) in chirp::typed_limits() {
            if policy.has_rule(id) && !policy.limits().any(|(set, _)| set.as_str() == id) {
                return Err(Error::Chirp(format!(
                    "{path}: no [[limit]] sets {id:?}, which a Chirp handler checks; a [[rule]] \
                     of that id is not its quota (the gateway refuses to start on this file)"
                )));
            }
        }
        Ok(policy)
    }

    /// Whether one of its `[[rule]]`s has the id `id`.
    fn has_rule(&self, id: &str) -> bool {
        let mut rules = self.file.iter().flat_map(|file| file.rules().rules());
        rules.any(|rule| rule.id().as_str() == id)
    }

    /// Its name in tables, the CSV and charts.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Which policy it is.
    pub fn kind(&self) -> PolicyKind {
        self.kind
    }

    /// Its rules as a rule file (re-rendered from what was read).
    pub fn rules_toml(&self) -> String {
        self.file.as_ref().map_or(String::new(), RuleFile::to_toml)
    }

    /// The quota its rule or `[[limit]]` `id` sets, if it has one (a rule with per-key
    /// overrides: its default quota).
    ///
    /// ```
    /// use tollgate_simulator::Policy;
    ///
    /// let layered = Policy::layered()?;
    /// assert_eq!(layered.quota("signups-per-device").map(|quota| quota.limit()), Some(3));
    /// assert_eq!(layered.quota("no-such-rule"), None);
    /// # Ok::<(), tollgate_simulator::Error>(())
    /// ```
    pub fn quota(&self, id: &str) -> Option<Quota> {
        let rules = self.file.iter().flat_map(|file| file.rules().rules());
        let ruled = rules.map(|rule| (rule.id(), rule.quota()));
        ruled
            .chain(self.limits())
            .find(|(rule, _)| rule.as_str() == id)
            .map(|(_, quota)| *quota)
    }

    /// What each of its rules and typed limits does while the store is down, by id: a rule that
    /// cannot refuse (shadow, flag) lets everything through, whatever it says.
    pub fn failure_policies(&self) -> Vec<(RuleId, OnStoreFailure)> {
        let mut policies: Vec<(RuleId, OnStoreFailure)> = Vec::new();
        for rule in self.file.iter().flat_map(|file| file.rules().rules()) {
            if !policies.iter().any(|(id, _)| id == rule.id()) {
                let failure = if rule.can_refuse() {
                    rule.on_store_failure()
                } else {
                    OnStoreFailure::Open
                };
                policies.push((rule.id().clone(), failure));
            }
        }
        let off = self.typed_limits_off();
        for (id, failure) in chirp::typed_limits() {
            if let Ok(id) = RuleId::new(id)
                && !off.contains(&id)
            {
                policies.push((id, failure));
            }
        }
        policies
    }

    /// The typed limits in Chirp's handlers this policy sets no quota for: off.
    pub fn typed_limits_off(&self) -> Vec<RuleId> {
        chirp::typed_limits()
            .into_iter()
            .filter_map(|(id, _)| RuleId::new(id).ok())
            .filter(|id| !self.limits().any(|(set, _)| set == id))
            .collect()
    }

    /// The layer over `store` enforcing this policy, with the registry the handlers' typed
    /// limits read (the file's `[[limit]]` quotas; a typed limit the file leaves out admits
    /// everything, and the outage store never fails it).
    pub(crate) fn layer<St: Store>(&self, store: St) -> Result<RateLimitLayer<St>, Error> {
        let registry = QuotaRegistry::new();
        for (id, quota) in self.limits() {
            registry.set(id.clone(), *quota);
        }
        let off = Quota::fixed_window(tollgate::core::quota::MAX_LIMIT, Duration::from_secs(1))
            .map_err(Error::Quota)?;
        for id in self.typed_limits_off() {
            registry.set(id, off);
        }
        let layer = RateLimitLayer::new(store).registry(registry);
        if let Some(file) = &self.file {
            file.install(&layer).map_err(Error::Rules)?;
        }
        Ok(layer)
    }

    /// The `[[limit]]` quotas it sets.
    fn limits(&self) -> impl Iterator<Item = (&RuleId, &Quota)> {
        self.file.iter().flat_map(RuleFile::limits)
    }
}
