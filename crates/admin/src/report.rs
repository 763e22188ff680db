//! What the API and the status page both read from a running limiter: its health (the rules
//! alerting near their limit among it) and a rule's top refused callers.

use tollgate_core::RuleId;

use crate::state::State;
use crate::views::{AlertView, CallerView, FleetHealth, HealthView, RulesHealth, TopView};

/// The top refused callers of `rule`: the fleet's when configured (this gateway's when Redis
/// cannot answer), else this gateway's.
pub(crate) async fn top_refused(state: &State, rule: &RuleId, n: usize) -> Option<TopView> {
    #[cfg(feature = "fleet")]
    if let Some(fleet) = &state.fleet_top {
        match fleet.report(rule, n).await {
            Ok(callers) => {
                return Some(TopView {
                    scope: "fleet".to_owned(),
                    callers: callers.into_iter().map(CallerView::from).collect(),
                    refusals: None,
                    dropped: None,
                });
            }
            Err(error) => {
                tracing::warn!(target: "tollgate::admin", %error, "cannot read the fleet's top refused callers; showing this gateway's");
            }
        }
    }
    let report = state.layer.top_refused(rule, n)?;
    Some(TopView {
        scope: "gateway".to_owned(),
        callers: report.callers.into_iter().map(CallerView::from).collect(),
        refusals: Some(report.refusals),
        dropped: Some(report.dropped),
    })
}

/// Where the limiter stands.
pub(crate) async fn health_of(state: &State) -> HealthView {
    let store = (state.health)().await;
    let status = state.watch_status();
    let rules = RulesHealth {
        versions: state.versions(),
        last_error: status
            .as_ref()
            .and_then(|status| status.last_error.as_ref())
            .map(ToString::to_string),
        changes_error: status
            .as_ref()
            .and_then(|status| status.overlay_error.as_ref())
            .map(ToString::to_string),
    };
    let fleet = fleet_health(state);
    let healthy = store.reachable
        && store.breaker_open != Some(true)
        && rules.last_error.is_none()
        && rules.changes_error.is_none()
        && fleet.as_ref().is_none_or(|fleet| fleet.refused.is_none());
    HealthView {
        status: if healthy { "ok" } else { "degraded" }.to_owned(),
        store,
        rules,
        fleet,
        alerting: state
            .layer
            .alerts()
            .into_iter()
            .map(AlertView::from)
            .collect(),
    }
}

fn fleet_health(state: &State) -> Option<FleetHealth> {
    #[cfg(feature = "fleet")]
    if let crate::changes::Changes::Fleet { fleet, .. } = &state.changes {
        let status = fleet.status();
        return Some(FleetHealth {
            version: status.version,
            in_redis: status.in_redis,
            subscribed: status.subscribed,
            refused: status
                .refused
                .map(|(version, why)| format!("version {version}: {why}")),
            last_redis_error: status.last_redis_error,
        });
    }
    let _ = state;
    None
}
