//! What the admin API answers, as JSON (and as schemas in its OpenAPI document).

use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize};
use tollgate_config::{QUOTA_FIELDS, RuleFile, WatchStatus};
use tollgate_core::{Mode, OnStoreFailure};
use tollgate_tower::Rule;
use tollgate_tower::observe::alerts::Alert;
use tollgate_tower::observe::stats::{Counts, RuleStats};
use utoipa::ToSchema;

use crate::health::StoreReport;
use crate::state::State;

/// One rule in force.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct RuleView {
    /// The rule's id.
    pub(crate) id: String,
    /// Where it comes from: `file` (the rule file), `admin` (a change made through this API
    /// on this gateway), `fleet` (the fleet document), or `code` (built in code; read-only).
    pub(crate) source: String,
    /// `enforce`, `shadow` or `read_only`.
    pub(crate) mode: String,
    /// `open`, `open_within`, `local` or `closed`.
    pub(crate) on_store_failure: String,
    /// The quota's fields, as in the rule file (`algorithm = "fixed_window", limit = 50, ...`).
    pub(crate) quota: String,
    /// The rule as a rule file would write it (`None` for a rule built in code).
    pub(crate) toml: Option<String>,
}

/// The versions of the rules in force.
#[derive(Debug, Clone, Default, Serialize, ToSchema)]
pub(crate) struct Versions {
    /// A fingerprint of the rule file in force.
    pub(crate) file: Option<String>,
    /// The version of the changes over it (`admin-<ms>` on this gateway, or the fleet
    /// document's), if any.
    pub(crate) changes: Option<String>,
    /// When rules were last swapped in, in seconds since the Unix epoch.
    pub(crate) loaded_at: Option<u64>,
    /// How many times rules were swapped in.
    pub(crate) loads: u64,
}

/// Every rule in force.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct RulesView {
    /// The versions.
    pub(crate) versions: Versions,
    /// Each rule, in the order they are checked.
    pub(crate) rules: Vec<RuleView>,
    /// The rules in force as one rule file — rules, `[[limit]]`s, `[exempt]` and `headers`,
    /// the changes over the file included — which loads again to the same rules (rules built
    /// in code are listed as comments).
    pub(crate) toml: String,
}

/// A change made.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ChangeView {
    /// The version of the changes now in force (empty when every change was withdrawn).
    pub(crate) version: String,
    /// The rule as it is now (`None`: it no longer exists).
    pub(crate) rule: Option<RuleView>,
}

/// Decisions of one kind each.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub(crate) struct CountsView {
    /// Allowed.
    pub(crate) allowed: u64,
    /// Refused by an enforcing rule.
    pub(crate) refused: u64,
    /// Would have been refused by a shadow rule.
    pub(crate) shadow_refused: u64,
}

impl From<Counts> for CountsView {
    fn from(counts: Counts) -> Self {
        CountsView {
            allowed: counts.allowed,
            refused: counts.refused,
            shadow_refused: counts.shadow_refused,
        }
    }
}

/// One refused caller.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct CallerView {
    /// The caller as the layer shows keys: a keyed fingerprint unless raw keys are enabled.
    pub(crate) caller: String,
    /// Refusals counted (at most `error` above the truth, never below).
    pub(crate) count: u64,
    /// How far `count` may be above the truth.
    pub(crate) error: u64,
}

impl From<tollgate_tower::observe::top_refused::TopCaller> for CallerView {
    fn from(caller: tollgate_tower::observe::top_refused::TopCaller) -> Self {
        CallerView {
            caller: caller.caller,
            count: caller.count,
            error: caller.error,
        }
    }
}

#[cfg(feature = "fleet")]
impl From<tollgate_published::top::FleetCaller> for CallerView {
    fn from(caller: tollgate_published::top::FleetCaller) -> Self {
        CallerView {
            caller: caller.caller,
            count: caller.count,
            error: caller.error,
        }
    }
}

/// The most refused callers over the last hour.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct TopView {
    /// `gateway` (this gateway's refusals) or `fleet` (every live gateway's).
    pub(crate) scope: String,
    /// The callers, most refused first.
    pub(crate) callers: Vec<CallerView>,
    /// Refusals counted in the window (this gateway only).
    pub(crate) refusals: Option<u64>,
    /// Refusals dropped because the counting channel was full (this gateway only).
    pub(crate) dropped: Option<u64>,
}

/// One rule's numbers.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct StatsView {
    /// The rule.
    pub(crate) rule: String,
    /// Since the admin API started counting.
    pub(crate) since_start: CountsView,
    /// The current minute and the four before.
    pub(crate) last_5_minutes: CountsView,
    /// The current minute and the 59 before.
    pub(crate) last_hour: CountsView,
    /// The last 60 minutes, oldest first.
    pub(crate) per_minute: Vec<CountsView>,
    /// The most refused callers (`None` unless the layer tracks them).
    pub(crate) top_refused: Option<TopView>,
}

impl StatsView {
    pub(crate) fn new(rule: &str, stats: RuleStats, top_refused: Option<TopView>) -> StatsView {
        StatsView {
            rule: rule.to_owned(),
            since_start: stats.since_start.into(),
            last_5_minutes: stats.last_5_minutes.into(),
            last_hour: stats.last_hour.into(),
            per_minute: stats.per_minute.into_iter().map(CountsView::from).collect(),
            top_refused,
        }
    }
}

/// The caller to reset: one value, or one per part of the rule's key.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub(crate) enum KeyValues {
    /// One value: an IP address, a header value, ...
    One(String),
    /// One value per part of a combined key, in order.
    Parts(Vec<String>),
}

/// `POST /v1/rules/{id}/reset`'s body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResetRequest {
    /// The caller, as a request would name it: `"2001:db8::1"` (grouped into its /64 when the
    /// rule counts so), `"partner-acme"`, or `["acct-1", "GET /posts"]` for a combined key.
    pub(crate) key: KeyValues,
}

/// What a reset cleared.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ResetView {
    /// The caller as the layer shows keys (a fingerprint by default).
    pub(crate) caller: String,
    /// The store entries cleared: the rule's count, and an escalating rule's strikes and block.
    pub(crate) cleared: Vec<String>,
}

/// Where the rules stand.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct RulesHealth {
    /// The versions in force.
    pub(crate) versions: Versions,
    /// The mistakes of the newest rule file, if it was refused (the rules in force stay).
    pub(crate) last_error: Option<String>,
    /// The mistakes of the newest change or fleet document, if it was refused.
    pub(crate) changes_error: Option<String>,
}

/// Where this gateway stands with the fleet document.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct FleetHealth {
    /// The version in force here.
    pub(crate) version: Option<u64>,
    /// The version in Redis at the last read.
    pub(crate) in_redis: Option<String>,
    /// Whether the announcement channel is subscribed.
    pub(crate) subscribed: bool,
    /// The newest version refused here, and why.
    pub(crate) refused: Option<String>,
    /// The last failure to read Redis.
    pub(crate) last_redis_error: Option<String>,
}

/// A rule alerting near its limit (its `alert_at`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct AlertView {
    /// The rule.
    pub(crate) rule: String,
    /// The share of its limit the rule alerts at, above 0 and at most 1.
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub(crate) alert_at: f64,
    /// The highest share of its limit a caller reached since the alert was raised, from
    /// `alert_at` to 1 (1: refused).
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub(crate) reached: f64,
    /// When the alert was raised, in seconds since the Unix epoch.
    pub(crate) since: u64,
}

impl From<Alert> for AlertView {
    fn from(alert: Alert) -> Self {
        AlertView {
            rule: alert.rule.as_str().to_owned(),
            alert_at: alert.alert_at.get(),
            reached: alert.reached,
            since: alert.since.as_micros() / 1_000_000,
        }
    }
}

/// `GET /v1/health`'s answer.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct HealthView {
    /// `ok`, or `degraded` when the store does not answer, the breaker is open, or the newest
    /// rules were refused (an alerting rule is traffic near a limit, not a limiter in trouble:
    /// it leaves the status as it is).
    pub(crate) status: String,
    /// The store.
    pub(crate) store: StoreReport,
    /// The rules.
    pub(crate) rules: RulesHealth,
    /// The fleet document, when changes go to the fleet.
    pub(crate) fleet: Option<FleetHealth>,
    /// The rules alerting now — a caller reached the share of its limit the rule states in
    /// `alert_at`, and its allowance has not been whole since — by id.
    pub(crate) alerting: Vec<AlertView>,
}

/// The name a rule file gives `mode`.
pub(crate) fn mode_name(mode: Mode) -> String {
    match mode {
        Mode::Enforce => "enforce".to_owned(),
        Mode::Shadow => "shadow".to_owned(),
        Mode::ReadOnly => "read_only".to_owned(),
    }
}

/// The name a rule file gives `policy`.
pub(crate) fn policy_name(policy: OnStoreFailure) -> String {
    match policy {
        OnStoreFailure::Open => "open".to_owned(),
        OnStoreFailure::OpenWithin(_) => "open_within".to_owned(),
        OnStoreFailure::Local => "local".to_owned(),
        OnStoreFailure::Closed => "closed".to_owned(),
    }
}

/// The quota fields of a rule's TOML table, on one line.
fn quota_of(rule: &Rule) -> String {
    match rule.source_toml() {
        Some(table) => table
            .lines()
            .filter(|line| {
                line.split_once(" = ")
                    .is_some_and(|(name, _)| QUOTA_FIELDS.contains(&name))
            })
            .collect::<Vec<_>>()
            .join(", "),
        None => format!("{:?}", rule.quota()),
    }
}

impl State {
    /// The document of changes in force, if any.
    pub(crate) fn changes_document(&self) -> Option<RuleFile> {
        self.changes.overlay()?.document()
    }

    /// Where the rule file and changes stand (`None`: rules are code).
    pub(crate) fn watch_status(&self) -> Option<WatchStatus> {
        Some(self.changes.overlay()?.status())
    }

    /// The versions in force.
    pub(crate) fn versions(&self) -> Versions {
        let Some(status) = self.watch_status() else {
            return Versions::default();
        };
        Versions {
            file: status.version,
            changes: status.overlay_version,
            loaded_at: status
                .loaded_at
                .and_then(|at| at.duration_since(UNIX_EPOCH).ok())
                .map(|since| since.as_secs()),
            loads: status.loads,
        }
    }

    /// `rule` as the API shows it, given the changes document in force.
    pub(crate) fn rule_view(
        &self,
        rule: &Rule,
        changes: Option<&RuleFile>,
        changes_version: Option<&str>,
    ) -> RuleView {
        let id = rule.id().as_str();
        let source = if changes.is_some_and(|document| document.ids().any(|changed| changed == id))
        {
            if changes_version
                .is_some_and(|version| version.starts_with(crate::changes::LOCAL_VERSION))
            {
                "admin"
            } else {
                "fleet"
            }
        } else if rule.source_toml().is_some() {
            "file"
        } else {
            "code"
        };
        RuleView {
            id: id.to_owned(),
            source: source.to_owned(),
            mode: mode_name(rule.mode()),
            on_store_failure: policy_name(rule.on_store_failure()),
            quota: quota_of(rule),
            toml: rule.source_toml().map(str::to_owned),
        }
    }

    /// Every rule in force.
    pub(crate) fn rules_view(&self) -> RulesView {
        let rules = self.layer.rules();
        let document = self.changes_document();
        let versions = self.versions();
        let mut seen: Vec<&str> = Vec::new();
        let views = rules
            .rules()
            .filter(|rule| {
                let id = rule.id().as_str();
                let first = !seen.contains(&id);
                seen.push(id);
                first
            })
            .map(|rule| self.rule_view(rule, document.as_ref(), versions.changes.as_deref()))
            .collect();
        RulesView {
            versions,
            rules: views,
            toml: match self.changes.overlay() {
                Some(overlay) => overlay.to_toml(),
                None => tollgate_config::rules_to_toml(&rules),
            },
        }
    }

    /// The rule `id` in force, as the API shows it.
    pub(crate) fn find_rule(&self, id: &str) -> Option<RuleView> {
        let rules = self.layer.rules();
        let rule = rules.rules().find(|rule| rule.id().as_str() == id)?;
        let document = self.changes_document();
        let versions = self.versions();
        Some(self.rule_view(rule, document.as_ref(), versions.changes.as_deref()))
    }
}
