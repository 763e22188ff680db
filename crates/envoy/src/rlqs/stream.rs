//! One Envoy's stream: its domain, its buckets, and each report answered with the assignments
//! its buckets need (none, when every bucket's assignment stands).
//!
//! A report is checked whole first (`check.rs`): one that cannot be answered ends the stream
//! with `INVALID_ARGUMENT` and counts nothing. Then each bucket, in the report's order, is
//! matched to the rules in force (`target.rs`), its bookkeeping told what Envoy reported
//! (`bucket.rs`), and what it needs is drawn from the store (`draw.rs`) and sent back in one
//! message (`assignment.rs`). When Envoy closes its side, the response stream ends with `OK`;
//! the buckets' leases end with it (their unspent units stay charged).

use std::collections::HashMap;
use std::sync::Arc;

use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::BucketAction;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::{
    BucketId, RateLimitQuotaResponse, RateLimitQuotaUsageReports,
};
use tokio::sync::mpsc;
use tollgate_core::RuleId;
use tonic::{Status, Streaming};

use super::assignment;
use super::bucket::{Bucket, Next};
use super::check::check;
use super::draw::draw;
use super::service::QuotaService;
use super::target::{Target, target};
use crate::table::DescriptorTable;

/// The most buckets one stream keeps; a bucket reported beyond them is abandoned (Envoy then
/// applies its `no_assignment_behavior` to it until room is made by quiet buckets abandoned).
pub const MAX_BUCKETS_PER_STREAM: usize = 100_000;

/// A bucket id's pairs, sorted: the same bucket whatever the order of its map.
type BucketKey = Vec<(String, String)>;

/// Answers `reports` into `answers` until either side ends.
pub(crate) async fn serve(
    service: QuotaService,
    mut reports: Streaming<RateLimitQuotaUsageReports>,
    answers: mpsc::Sender<Result<RateLimitQuotaResponse, Status>>,
) {
    let mut envoy = Envoy::default();
    loop {
        let report = tokio::select! {
            report = reports.message() => report,
            () = answers.closed() => return,
        };
        let answer = match report {
            // Envoy closed its side: the response stream ends, with OK.
            Ok(None) => return,
            // The stream broke (the client went away, or sent what is no report).
            Err(status) => {
                tracing::debug!(target: "tollgate::envoy", %status, "a quota stream ended");
                return;
            }
            Ok(Some(report)) => envoy.answer(&service, report).await,
        };
        let last = answer.is_err();
        match answer {
            Ok(None) => continue,
            Ok(Some(response)) => {
                if answers.send(Ok(response)).await.is_err() {
                    return;
                }
            }
            Err(status) => {
                let _ = answers.send(Err(status)).await;
            }
        }
        if last {
            return;
        }
    }
}

/// What one stream knows of its Envoy.
#[derive(Default)]
pub(crate) struct Envoy {
    domain: Option<String>,
    buckets: HashMap<BucketKey, Bucket>,
}

impl Envoy {
    /// The answer to one report: the actions its buckets need (`None`: none), or
    /// `INVALID_ARGUMENT` when it cannot be answered.
    pub(crate) async fn answer(
        &mut self,
        service: &QuotaService,
        report: RateLimitQuotaUsageReports,
    ) -> Result<Option<RateLimitQuotaResponse>, Status> {
        check(&report, self.domain.as_deref())?;
        let domain = self.domain.get_or_insert(report.domain).clone();
        // Held across the store's awaits: a reload in the meantime is read by the next report.
        let table: Arc<DescriptorTable> = service.table().load_full();
        let mut actions = Vec::new();
        for usage in report.bucket_quota_usages {
            let Some(id) = usage.bucket_id else { continue };
            let counts = (usage.num_requests_allowed, usage.num_requests_denied);
            if let Some(action) = self.bucket(service, &table, &domain, id, counts).await {
                service.sent(&action);
                actions.push(action);
            }
        }
        Ok((!actions.is_empty()).then_some(RateLimitQuotaResponse {
            bucket_action: actions,
        }))
    }

    /// What bucket `id` needs after a report of `counts` (allowed, denied).
    async fn bucket(
        &mut self,
        service: &QuotaService,
        table: &DescriptorTable,
        domain: &str,
        id: BucketId,
        counts: (u64, u64),
    ) -> Option<BucketAction> {
        let settings = service.settings();
        let now = service.now();
        let mut key: BucketKey = id.bucket.clone().into_iter().collect();
        key.sort_unstable();
        if !self.buckets.contains_key(&key) && self.buckets.len() >= MAX_BUCKETS_PER_STREAM {
            tracing::warn!(target: "tollgate::envoy", domain, "an Envoy reports more than {MAX_BUCKETS_PER_STREAM} quota buckets; a new one is abandoned");
            return Some(assignment::abandon(&id));
        }
        let target = target(table, domain, &id.bucket);
        let basis = target.basis();
        let max_lease = match &target {
            Target::Counted { rule, .. } => settings.max_lease(rule.quota()),
            _ => 1,
        };
        let bucket = self
            .buckets
            .entry(key.clone())
            .or_insert_with(|| Bucket::new(now));
        let ttl = settings.ttl;
        match bucket.report(counts, &basis, max_lease, now, settings) {
            Next::Keep => None,
            Next::Abandon => {
                self.buckets.remove(&key);
                Some(assignment::abandon(&id))
            }
            Next::Allow => {
                bucket.blanket(true, basis, now, ttl);
                Some(assignment::blanket(&id, true, ttl))
            }
            Next::Deny => {
                if let Target::Refused(rule, why) = &target {
                    let rule = rule.map(RuleId::as_str);
                    tracing::debug!(target: "tollgate::envoy", domain, rule, why, "a quota bucket is denied: it cannot be counted");
                }
                bucket.blanket(false, basis, now, ttl);
                Some(assignment::blanket(&id, false, ttl))
            }
            Next::Draw { size, uncovered } => {
                let Target::Counted {
                    candidate,
                    rule,
                    key: caller,
                } = &target
                else {
                    return None;
                };
                let drawn = draw(
                    service.store(),
                    &candidate.id,
                    rule,
                    caller,
                    size,
                    uncovered,
                )
                .await;
                let marker = bucket.drew(basis, drawn.debt, drawn.outcome, now, ttl);
                Some(assignment::of_draw(&id, drawn.outcome, marker, settings))
            }
        }
    }
}
