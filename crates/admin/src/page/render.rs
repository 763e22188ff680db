//! The status page itself.

use maud::{DOCTYPE, Markup, html};
use tollgate_core::RuleId;

use super::alerting::alerting;
use super::chart::chart;
use super::limit_line::minute_limit;
use super::quota_cell::QuotaCell;
use crate::report::{health_of, top_refused};
use crate::state::State;
use crate::views::{CountsView, RuleView, TopView};

/// How often the page reloads itself, in seconds.
const REFRESH_SECONDS: u32 = 10;

/// How many top refused callers each rule shows.
const TOP_SHOWN: usize = 5;

pub(crate) const STYLE: &str = "
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5rem; color: #1d1d1f; background: #fafafa; }
h1 { font-size: 1.3rem; margin: 0 0 .5rem; }
header { display: flex; gap: 1rem; align-items: center; flex-wrap: wrap; }
.badge { padding: .1rem .6rem; border-radius: 1rem; font-weight: 600; }
.ok { background: #d8f5dd; color: #11602a; } .degraded { background: #fde2e1; color: #8a1c17; }
.alerting { background: #fff1cc; color: #7a4a00; padding: 0 .3rem; border-radius: .3rem; }
ul.alerting-rules { margin: 0; padding-left: 1.1rem; }
table { border-collapse: collapse; width: 100%; background: white; margin-top: 1rem; }
th, td { text-align: left; padding: .35rem .6rem; border-bottom: 1px solid #e5e5ea; vertical-align: top; }
th { background: #f2f2f7; font-weight: 600; }
code, pre { font: 12px ui-monospace, monospace; }
pre.error { background: #fde2e1; padding: .6rem; white-space: pre-wrap; }
dl { display: grid; grid-template-columns: max-content auto; gap: .2rem 1rem; margin: .5rem 0; }
dt { color: #6e6e73; } dd { margin: 0; }
ol { margin: 0; padding-left: 1.2rem; }
.refused { color: #8a1c17; } .muted { color: #6e6e73; }
.words { font-weight: 600; }
ul.overrides { margin: .3rem 0 0; padding-left: 1.1rem; }
details.toml summary { color: #6e6e73; cursor: pointer; font-size: 12px; margin-top: .3rem; }
details.toml pre { background: #f2f2f7; padding: .4rem; margin: .3rem 0 0; }
figure.chart { margin: 0; }
figure.chart svg { display: block; background: white; }
figure.chart text { font: 10px system-ui, sans-serif; fill: #3a3a3c; }
figure.chart .axis-title { font-weight: 600; fill: #1d1d1f; }
figure.chart figcaption { font-size: 12px; max-width: 440px; }
.login { max-width: 22rem; margin: 4rem auto; background: white; padding: 1.5rem; border-radius: .6rem; }
.login input { display: block; width: 100%; margin: .4rem 0 .8rem; padding: .4rem; box-sizing: border-box; }
.problem { color: #8a1c17; }
";

/// The page for `state`, its links under `base`.
pub(crate) async fn render(state: &State, base: &str) -> Markup {
    let health = health_of(state).await;
    let rules = state.rules_view();
    let in_force = state.layer.rules();
    let mut rows = Vec::with_capacity(rules.rules.len());
    for rule in &rules.rules {
        let id = RuleId::new(&rule.id).ok();
        let stats = id.as_ref().and_then(|id| state.layer.stats(id));
        let top = match &id {
            Some(id) => top_refused(state, id, TOP_SHOWN).await,
            None => None,
        };
        // The view lists the first rule of each id, as `find` does.
        let quota = in_force
            .rules()
            .find(|found| found.id().as_str() == rule.id)
            .map(|found| QuotaCell::of(state, found));
        let is_alerting = (health.alerting.iter()).any(|alert| alert.rule == rule.id);
        rows.push(row(
            rule,
            is_alerting,
            quota.as_ref(),
            stats.map(|stats| stats.per_minute.into_iter().map(CountsView::from).collect()),
            top,
        ));
    }
    let store = &health.store;
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="refresh" content=(REFRESH_SECONDS);
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "tollgate — status" }
                style { (STYLE) }
            }
            body {
                header {
                    h1 { "tollgate status" }
                    span #status .badge .(health.status) { (health.status) }
                    form method="post" action={ (base) "/logout" } { button type="submit" { "Log out" } }
                }
                dl #health {
                    dt { "Store" }
                    dd #store {
                        @if store.reachable { "reachable" } @else { span.refused { "unreachable" } }
                        @if let Some(latency) = store.latency_ms { " (" (format!("{latency:.1}")) " ms)" }
                        @if let Some(error) = &store.error { " — " (error) }
                    }
                    dt { "Breaker" }
                    dd #breaker {
                        @match store.breaker_open {
                            Some(true) => span.refused { "open: answering by failure policies" },
                            Some(false) => "closed",
                            None => span.muted { "none (no fallback store)" },
                        }
                    }
                    @if !store.falling_back.is_empty() {
                        dt { "Falling back" }
                        dd.refused { (store.falling_back.join(", ")) }
                    }
                    @if !store.failing_nodes.is_empty() {
                        dt { "Failing nodes" }
                        dd.refused #failing-nodes { (store.failing_nodes.join(", ")) }
                    }
                    @if !store.counted_exactly.is_empty() {
                        dt { "Counted exactly" }
                        dd #counted-exactly { (store.counted_exactly.join(", ")) }
                    }
                    dt { "Alerting" }
                    dd #alerting { (alerting(&health.alerting)) }
                    dt { "Rules version" }
                    dd #version {
                        "file " code { (rules.versions.file.as_deref().unwrap_or("—")) }
                        @if let Some(changes) = &rules.versions.changes { ", changes " code { (changes) } }
                    }
                    dt { "Last config error" }
                    dd { @if health.rules.last_error.is_none() && health.rules.changes_error.is_none() { span.muted { "none" } } }
                }
                @if let Some(error) = &health.rules.last_error { pre.error #config-error { (error) } }
                @if let Some(error) = &health.rules.changes_error { pre.error #changes-error { (error) } }
                table #rules {
                    thead { tr {
                        th { "Rule" } th { "Source" } th { "Quota" } th { "Mode" } th { "On store failure" }
                        th { "Decisions per minute, last hour" } th { "Last 5 minutes" } th { "Top refused callers" }
                    } }
                    tbody { @for row in &rows { (row) } }
                }
                p.muted { "Refreshes every " (REFRESH_SECONDS) " s. Callers are keyed fingerprints unless raw keys are enabled." }
            }
        }
    }
}

fn row(
    rule: &RuleView,
    is_alerting: bool,
    quota: Option<&QuotaCell>,
    per_minute: Option<Vec<CountsView>>,
    top: Option<TopView>,
) -> Markup {
    let last_five = per_minute.as_ref().map(|minutes| {
        minutes
            .iter()
            .rev()
            .take(5)
            .fold((0, 0, 0), |(allowed, refused, shadow), counts| {
                (
                    allowed + counts.allowed,
                    refused + counts.refused,
                    shadow + counts.shadow_refused,
                )
            })
    });
    html! {
        tr id={ "rule-" (rule.id) } {
            td {
                code { (rule.id) }
                @if is_alerting { " " span.badge.alerting { "alerting" } }
            }
            td { (rule.source) }
            td.quota {
                @match quota {
                    Some(quota) => (quota.render()),
                    // Replaced between reading the view and the rules: the next refresh has it.
                    None => code { (rule.quota) },
                }
            }
            td { (rule.mode) }
            td { (rule.on_store_failure) }
            td {
                @if let (Some(minutes), Some(quota)) = (&per_minute, quota) {
                    (chart(&rule.id, minutes, &minute_limit(&quota.enforced), quota.has_overrides()))
                }
            }
            td.counts {
                @if let Some((allowed, refused, shadow)) = last_five {
                    (allowed) " allowed, " span.refused { (refused) " refused" }
                    @if shadow > 0 { ", " (shadow) " shadow" }
                }
            }
            td {
                @match &top {
                    Some(top) if !top.callers.is_empty() => ol.top { @for caller in &top.callers {
                        li { code { (caller.caller) } " " (caller.count) @if caller.error > 0 { " (±" (caller.error) ")" } }
                    } },
                    Some(_) => span.muted { "none" },
                    None => span.muted { "not tracked" },
                }
            }
        }
    }
}
