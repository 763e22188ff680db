//! The quota service's side of the tests: the service on a real tonic server on 127.0.0.1:0
//! (with the rate limit service, on one store and one rule file), and a client of ours playing
//! an Envoy: one bidirectional stream, a report sent and the next answer read.

use std::net::SocketAddr;

use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tollgate_config::RuleFile;
use tollgate_envoy::envoy_types::pb::envoy::r#type::v3::TokenBucket;
use tollgate_envoy::envoy_types::pb::envoy::r#type::v3::rate_limit_strategy::{BlanketRule, Strategy};
use tollgate_envoy::envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::BucketAction;
use tollgate_envoy::envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::bucket_action::BucketAction as Action;
use tollgate_envoy::envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_service_client::RateLimitQuotaServiceClient;
use tollgate_envoy::envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_usage_reports::BucketQuotaUsage;
use tollgate_envoy::envoy_types::pb::envoy::service::rate_limit_quota::v3::{
    BucketId, RateLimitQuotaResponse, RateLimitQuotaUsageReports,
};
use tollgate_envoy::envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use tollgate_envoy::{QuotaService, RateLimitService};
use tollgate_testing::ManualClock;
use tonic::Streaming;
use tonic::transport::Channel;

use super::{Backend, service_on};

/// Both services on one store, served on one port.
pub struct QuotaServed {
    pub limits: RateLimitService,
    pub quotas: QuotaService,
    pub clock: ManualClock,
    pub address: SocketAddr,
    /// A client of the rate limit service, to read what the quota service charged.
    pub rls: RateLimitServiceClient<Channel>,
}

/// The quota service on `backend`, set up by `configure`, made before `rules` are installed
/// into the rate limit service (it follows them), both served.
pub async fn served_quotas(
    backend: Backend,
    rules: &RuleFile,
    configure: impl FnOnce(QuotaService) -> QuotaService,
) -> QuotaServed {
    let (limits, clock) = service_on(backend).await;
    let quotas = configure(limits.quota_service().clock(clock.clone()));
    limits
        .set_rules(rules)
        .unwrap_or_else(|errors| panic!("{errors}"));
    serve_both(limits, quotas, clock).await
}

/// `limits` and `quotas` served on one port of 127.0.0.1.
pub async fn serve_both(
    limits: RateLimitService,
    quotas: QuotaService,
    clock: ManualClock,
) -> QuotaServed {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a free port");
    let address = listener.local_addr().expect("its address");
    let server = tonic::transport::Server::builder()
        .add_service(limits.server())
        .add_service(quotas.server());
    tokio::spawn(server.serve_with_incoming(TcpListenerStream::new(listener)));
    let rls = RateLimitServiceClient::connect(format!("http://{address}"))
        .await
        .expect("connect to the rate limit service");
    QuotaServed {
        limits,
        quotas,
        clock,
        address,
        rls,
    }
}

impl QuotaServed {
    /// A new stream, as one Envoy opens it.
    pub async fn envoy(&self) -> EnvoyStream {
        let mut client = RateLimitQuotaServiceClient::connect(format!("http://{}", self.address))
            .await
            .expect("connect to the quota service");
        let (reports, outbound) = mpsc::channel(16);
        let answers = client
            .stream_rate_limit_quotas(ReceiverStream::new(outbound))
            .await
            .expect("the stream opens")
            .into_inner();
        EnvoyStream { reports, answers }
    }
}

/// One Envoy's stream, from its side.
pub struct EnvoyStream {
    reports: mpsc::Sender<RateLimitQuotaUsageReports>,
    answers: Streaming<RateLimitQuotaResponse>,
}

impl EnvoyStream {
    /// Sends `usages` in `domain` and reads the next answer (`Ok(None)`: the stream ended).
    pub async fn report(
        &mut self,
        domain: &str,
        usages: Vec<BucketQuotaUsage>,
    ) -> Result<Option<RateLimitQuotaResponse>, tonic::Status> {
        self.send(domain, usages).await;
        self.answers.message().await
    }

    /// Sends `usages` in `domain` without waiting for an answer (there may be none).
    pub async fn send(&mut self, domain: &str, usages: Vec<BucketQuotaUsage>) {
        let report = RateLimitQuotaUsageReports {
            domain: domain.to_owned(),
            bucket_quota_usages: usages,
        };
        self.reports.send(report).await.expect("the stream is open");
    }

    /// The actions of one report's answer, or a panic naming what came instead.
    pub async fn actions(
        &mut self,
        domain: &str,
        usages: Vec<BucketQuotaUsage>,
    ) -> Vec<BucketAction> {
        match self.report(domain, usages).await {
            Ok(Some(answer)) => answer.bucket_action,
            other => panic!("expected an answer, got {other:?}"),
        }
    }

    /// Closes this side and reads what is left: the answers still to come, then how the
    /// stream ended.
    pub async fn close(self) -> (Vec<RateLimitQuotaResponse>, Result<(), tonic::Status>) {
        let EnvoyStream {
            reports,
            mut answers,
        } = self;
        drop(reports);
        let mut left = Vec::new();
        loop {
            match answers.message().await {
                Ok(Some(answer)) => left.push(answer),
                Ok(None) => return (left, Ok(())),
                Err(status) => return (left, Err(status)),
            }
        }
    }
}

/// A bucket id of (key, value) pairs.
pub fn bucket(pairs: &[(&str, &str)]) -> BucketId {
    BucketId {
        bucket: pairs
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect(),
    }
}

/// One bucket's usage: `allowed` and `denied` requests since the last report.
pub fn usage(pairs: &[(&str, &str)], allowed: u64, denied: u64) -> BucketQuotaUsage {
    BucketQuotaUsage {
        bucket_id: Some(bucket(pairs)),
        time_elapsed: None,
        num_requests_allowed: allowed,
        num_requests_denied: denied,
    }
}

/// What an action assigns, in brief.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Assigned {
    /// A token bucket of this many tokens.
    Tokens(u32),
    AllowAll,
    DenyAll,
    Abandon,
}

/// What `action` assigns, with its time to live in seconds (0 for an abandon).
pub fn assigned(action: &BucketAction) -> (Assigned, i64) {
    match &action.bucket_action {
        Some(Action::QuotaAssignmentAction(assignment)) => {
            let ttl = assignment
                .assignment_time_to_live
                .map_or(-1, |ttl| ttl.seconds);
            let strategy = assignment
                .rate_limit_strategy
                .as_ref()
                .and_then(|strategy| strategy.strategy.as_ref());
            let what = match strategy {
                Some(Strategy::TokenBucket(bucket)) => Assigned::Tokens(bucket.max_tokens),
                Some(Strategy::BlanketRule(rule)) if *rule == BlanketRule::DenyAll as i32 => {
                    Assigned::DenyAll
                }
                Some(Strategy::BlanketRule(_)) => Assigned::AllowAll,
                other => panic!("an unexpected strategy: {other:?}"),
            };
            (what, ttl)
        }
        Some(Action::AbandonAction(_)) => (Assigned::Abandon, 0),
        None => panic!("an action without an action: {action:?}"),
    }
}

/// The token bucket `action` assigns, whole.
pub fn token_bucket(action: &BucketAction) -> TokenBucket {
    match &action.bucket_action {
        Some(Action::QuotaAssignmentAction(assignment)) => match assignment
            .rate_limit_strategy
            .as_ref()
            .and_then(|strategy| strategy.strategy.as_ref())
        {
            Some(Strategy::TokenBucket(bucket)) => *bucket,
            other => panic!("not a token bucket: {other:?}"),
        },
        other => panic!("not an assignment: {other:?}"),
    }
}
