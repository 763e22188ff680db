//! A decision as Envoy reads it: the overall code, a status per descriptor, the IETF
//! `RateLimit` fields (and `Retry-After` and a problem body when over the limit).

use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
use envoy_types::pb::google::protobuf::Duration as ProtoDuration;
use http::HeaderMap;
use tollgate_core::{BatchDecision, Decision, Item, whole_seconds_up};
use tollgate_tower::Refused;
use tollgate_tower::headers::HeaderStyle;

use crate::plan::Planned;

/// An answer with no statuses: a domain no rule names.
pub(crate) fn unknown_domain() -> RateLimitResponse {
    RateLimitResponse {
        overall_code: Code::Ok as i32,
        ..RateLimitResponse::default()
    }
}

/// The answer to a request of `descriptors` descriptors, of which `planned` were counted as
/// `items` and decided as `batch` (`None`: nothing to count).
pub(crate) fn answer(
    descriptors: usize,
    planned: &[Planned<'_>],
    items: &[Item<'_>],
    batch: Option<&BatchDecision>,
    style: HeaderStyle,
) -> RateLimitResponse {
    let mut statuses = vec![
        DescriptorStatus {
            code: Code::Ok as i32,
            ..DescriptorStatus::default()
        };
        descriptors
    ];
    let Some(batch) = batch else {
        return RateLimitResponse {
            overall_code: Code::Ok as i32,
            statuses,
            ..RateLimitResponse::default()
        };
    };
    for ((planned, item), decided) in planned.iter().zip(items).zip(batch.items()) {
        let decision = decided.decision();
        let enforcing = item.is_enforcing();
        planned.candidate.counters.decided(decision, enforcing);
        if let Some(status) = statuses.get_mut(planned.at) {
            *status = status_of(planned, decision, enforcing);
        }
    }
    let (overall_code, headers, raw_body) = match batch.worst_refusal(items) {
        Some((at, refused)) if !batch.is_allowed() => {
            let item = &items[at];
            // A rule that does not disclose (`disclose = false`) is kept out of the fields, as
            // the HTTP layer keeps it; `Retry-After` and the problem body stay.
            let disclosed = planned
                .get(at)
                .is_some_and(|planned| planned.rule.is_disclosed());
            let style = if disclosed {
                style
            } else {
                HeaderStyle::none()
            };
            let refusal =
                Refused::for_policy(item.rule(), *item.quota(), *refused.decision(), style);
            let response = refusal.default_response();
            (
                Code::OverLimit,
                response.headers().clone(),
                response.body().to_vec(),
            )
        }
        _ => {
            let shown = planned
                .iter()
                .zip(items)
                .zip(batch.items())
                .filter(|((planned, _), _)| planned.rule.is_disclosed())
                .map(|((_, item), decided)| {
                    (item.rule().as_str(), item.quota(), decided.decision())
                });
            (Code::Ok, style.fields(shown), Vec::new())
        }
    };
    RateLimitResponse {
        overall_code: overall_code as i32,
        statuses,
        response_headers_to_add: header_values(&headers),
        raw_body,
        ..RateLimitResponse::default()
    }
}

/// One counted descriptor's status: OVER_LIMIT only when an enforcing rule refused (a shadow
/// rule's refusal is logged and counted, and the descriptor is OK). `current_limit` only for a
/// rule that discloses: Envoy turns every status with one into its `X-RateLimit-*` headers
/// (`enable_x_ratelimit_headers`), the least remaining deciding `X-RateLimit-Remaining`, so a
/// shadow rule would show a limit that is not enforced, and `disclose = false` would not hold.
fn status_of(planned: &Planned<'_>, decision: &Decision, enforcing: bool) -> DescriptorStatus {
    let over = enforcing && !decision.is_allowed();
    DescriptorStatus {
        code: if over { Code::OverLimit } else { Code::Ok } as i32,
        current_limit: planned.candidate.current_limit.clone(),
        limit_remaining: u32::try_from(decision.remaining()).unwrap_or(u32::MAX),
        duration_until_reset: Some(whole_seconds(decision.reset_after())),
        quota: None,
    }
}

/// `duration` in whole seconds, rounded up, as the `RateLimit` field's `t` says it. Envoy reads
/// only the seconds of `duration_until_reset` (its `X-RateLimit-Reset`): sent exactly, 39.9 s
/// would show as 39 beside `t=40`, a reset one second too early.
fn whole_seconds(duration: std::time::Duration) -> ProtoDuration {
    ProtoDuration {
        seconds: i64::try_from(whole_seconds_up(duration)).unwrap_or(i64::MAX),
        nanos: 0,
    }
}

/// `headers` as Envoy's header values (each value is ASCII: the fields are structured fields,
/// `Retry-After` a number and the content type a token).
fn header_values(headers: &HeaderMap) -> Vec<HeaderValue> {
    headers
        .iter()
        .filter_map(|(name, value)| {
            Some(HeaderValue {
                key: name.as_str().to_owned(),
                value: value.to_str().ok()?.to_owned(),
                raw_value: Vec::new(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_time_to_reset_is_whole_seconds_rounded_up_as_the_ratelimit_field_says() {
        let seconds = |duration| {
            let proto = whole_seconds(duration);
            (proto.seconds, proto.nanos)
        };
        assert_eq!(seconds(Duration::from_millis(39_990)), (40, 0));
        assert_eq!(seconds(Duration::from_secs(20)), (20, 0));
        assert_eq!(seconds(Duration::from_nanos(1)), (1, 0));
        assert_eq!(seconds(Duration::ZERO), (0, 0));
        assert_eq!(seconds(Duration::MAX), (i64::MAX, 0));
    }
}
