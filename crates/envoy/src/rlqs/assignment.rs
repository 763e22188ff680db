//! Assignments as Envoy reads them: a token bucket of a lease's tokens, `ALLOW_ALL`,
//! `DENY_ALL`, or abandoning a bucket.
//!
//! What Envoy 1.40's `rate_limit_quota` filter does with them, read from its source and seen
//! through a real Envoy (see the module's docs): it reads only the whole seconds of
//! `assignment_time_to_live` and of a token bucket's `fill_interval`; a token bucket it already
//! holds with the same `max_tokens`, `tokens_per_fill` and `fill_interval.nanos` is kept, tokens
//! and all, rather than started afresh. So each lease's bucket carries a marker in its fill
//! interval's nanoseconds, 0 or 1 by turns: a new lease is always a new bucket, and the rate
//! Envoy computes from whole seconds is the same.

use std::time::Duration;

use envoy_types::pb::envoy::r#type::v3::TokenBucket;
use envoy_types::pb::envoy::r#type::v3::rate_limit_strategy::{BlanketRule, Strategy};
use envoy_types::pb::envoy::r#type::v3::RateLimitStrategy;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::BucketId;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::BucketAction;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::bucket_action::{
    AbandonAction, BucketAction as Action, QuotaAssignmentAction,
};
use envoy_types::pb::google::protobuf::{Duration as ProtoDuration, UInt32Value};

use super::bucket::Outcome;
use super::settings::Settings;

/// The assignment a draw's `outcome` makes: its lease as a token bucket (`marker` telling it
/// from the last), `DENY_ALL` when nothing was granted or the rule fails closed, `ALLOW_ALL`
/// when it fails open; for the settings' time to live.
pub(crate) fn of_draw(
    id: &BucketId,
    outcome: Outcome,
    marker: bool,
    settings: &Settings,
) -> BucketAction {
    match outcome {
        Outcome::Tokens(tokens) => {
            token_bucket(id, tokens, settings.fill_interval(), marker, settings.ttl)
        }
        Outcome::Exhausted(_) | Outcome::Closed => blanket(id, false, settings.ttl),
        Outcome::Open => blanket(id, true, settings.ttl),
    }
}

/// A token bucket of `tokens` tokens for `ttl`: one token added per `fill_interval` (longer than
/// `ttl`, so none is added before the assignment ends), `marker` telling two leases in a row
/// apart.
pub(crate) fn token_bucket(
    id: &BucketId,
    tokens: u64,
    fill_interval: Duration,
    marker: bool,
    ttl: Duration,
) -> BucketAction {
    let mut fill_interval = proto_duration(fill_interval);
    fill_interval.nanos = i32::from(marker);
    let bucket = TokenBucket {
        max_tokens: u32::try_from(tokens).unwrap_or(u32::MAX),
        tokens_per_fill: Some(UInt32Value { value: 1 }),
        fill_interval: Some(fill_interval),
    };
    assign(id, Strategy::TokenBucket(bucket), ttl)
}

/// `ALLOW_ALL` (`allowed`) or `DENY_ALL` for `ttl`.
pub(crate) fn blanket(id: &BucketId, allowed: bool, ttl: Duration) -> BucketAction {
    let rule = if allowed {
        BlanketRule::AllowAll
    } else {
        BlanketRule::DenyAll
    };
    assign(id, Strategy::BlanketRule(rule as i32), ttl)
}

/// Abandon the bucket: Envoy forgets it, and starts over when a request matches it again.
pub(crate) fn abandon(id: &BucketId) -> BucketAction {
    BucketAction {
        bucket_id: Some(id.clone()),
        bucket_action: Some(Action::AbandonAction(AbandonAction {})),
    }
}

/// What an action is, as the service's metric counts it.
pub(crate) fn kind(action: &BucketAction) -> &'static str {
    let strategy = match &action.bucket_action {
        Some(Action::AbandonAction(_)) | None => return "abandon",
        Some(Action::QuotaAssignmentAction(assignment)) => assignment
            .rate_limit_strategy
            .as_ref()
            .and_then(|strategy| strategy.strategy.as_ref()),
    };
    match strategy {
        Some(Strategy::TokenBucket(_)) => "token_bucket",
        Some(Strategy::BlanketRule(rule)) if *rule == BlanketRule::DenyAll as i32 => "deny_all",
        _ => "allow_all",
    }
}

fn assign(id: &BucketId, strategy: Strategy, ttl: Duration) -> BucketAction {
    BucketAction {
        bucket_id: Some(id.clone()),
        bucket_action: Some(Action::QuotaAssignmentAction(QuotaAssignmentAction {
            assignment_time_to_live: Some(proto_duration(ttl)),
            rate_limit_strategy: Some(RateLimitStrategy {
                strategy: Some(strategy),
            }),
        })),
    }
}

/// `duration`'s whole seconds (Envoy reads no more).
fn proto_duration(duration: Duration) -> ProtoDuration {
    ProtoDuration {
        seconds: i64::try_from(duration.as_secs()).unwrap_or(i64::MAX),
        nanos: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> BucketId {
        BucketId {
            bucket: [("name".to_owned(), "edge".to_owned())].into(),
        }
    }

    #[test]
    fn two_leases_in_a_row_are_different_buckets_at_the_same_whole_second_rate() {
        let eleven = Duration::from_secs(11);
        let ttl = Duration::from_secs(10);
        let first = token_bucket(&id(), 5, eleven, false, ttl);
        let second = token_bucket(&id(), 5, eleven, true, ttl);
        assert_ne!(first, second);
        let Some(Action::QuotaAssignmentAction(assignment)) = &second.bucket_action else {
            panic!("an assignment: {second:?}");
        };
        let lives = assignment.assignment_time_to_live.unwrap_or_default();
        assert_eq!((lives.seconds, lives.nanos), (10, 0));
        let Some(Strategy::TokenBucket(bucket)) = assignment
            .rate_limit_strategy
            .as_ref()
            .and_then(|strategy| strategy.strategy)
        else {
            panic!("a token bucket: {second:?}");
        };
        let fill = bucket.fill_interval.unwrap_or_default();
        assert_eq!((bucket.max_tokens, fill.seconds, fill.nanos), (5, 11, 1));
        assert_eq!(bucket.tokens_per_fill.map(|fill| fill.value), Some(1));
        assert_eq!(kind(&second), "token_bucket");
        assert_eq!(kind(&blanket(&id(), false, ttl)), "deny_all");
        assert_eq!(kind(&blanket(&id(), true, ttl)), "allow_all");
        assert_eq!(kind(&abandon(&id())), "abandon");
    }
}
