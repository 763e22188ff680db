//! The gRPC face of the quota service: each Envoy's stream served by a task of its own
//! (`stream.rs`), its answers sent back as they are made.

use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_service_server::RateLimitQuotaService;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::{
    RateLimitQuotaResponse, RateLimitQuotaUsageReports,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::service::QuotaService;
use super::stream;

/// How many answers a stream holds for an Envoy slow to read them.
const ANSWERS_BUFFERED: usize = 16;

#[tonic::async_trait]
impl RateLimitQuotaService for QuotaService {
    type StreamRateLimitQuotasStream = ReceiverStream<Result<RateLimitQuotaResponse, Status>>;

    async fn stream_rate_limit_quotas(
        &self,
        request: Request<Streaming<RateLimitQuotaUsageReports>>,
    ) -> Result<Response<Self::StreamRateLimitQuotasStream>, Status> {
        let (answers, answered) = mpsc::channel(ANSWERS_BUFFERED);
        tokio::spawn(stream::serve(self.clone(), request.into_inner(), answers));
        Ok(Response::new(ReceiverStream::new(answered)))
    }
}
