//! A rate limit service that records what Envoy asks and answers as the test says: the other
//! end of the filter, to see the descriptors a real Envoy sends.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, RateLimit,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService, RateLimitServiceServer,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::Duration;
use tokio::net::TcpListener;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};

/// One descriptor as Envoy sent it: its entries' `(key, value)`s in order.
pub type Descriptor = Vec<(String, String)>;

/// One call as the service received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The filter's domain.
    pub domain: String,
    /// The request's descriptors, in the route's order.
    pub descriptors: Vec<Descriptor>,
}

/// What the service answers every call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// `OK`, for every descriptor.
    Ok,
    /// `OVER_LIMIT`, for every descriptor, with a limit of 10 a minute, none remaining, reset
    /// in 30 seconds (for Envoy's `X-RateLimit-*` headers).
    OverLimit,
}

/// A running recording service; it serves until the test's runtime ends.
#[derive(Debug, Clone)]
pub struct RecordingService {
    address: SocketAddr,
    calls: Arc<Mutex<Vec<Call>>>,
}

impl RecordingService {
    /// Starts the service on 127.0.0.1:0, answering every call with `answer`.
    pub async fn start(answer: Answer) -> Self {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .expect("bind the rate limit service");
        let address = listener.local_addr().expect("the service's address");
        let calls = Arc::new(Mutex::new(Vec::new()));
        let service = Recorder {
            answer,
            calls: Arc::clone(&calls),
        };
        tokio::spawn(
            Server::builder()
                .add_service(RateLimitServiceServer::new(service))
                .serve_with_incoming(TcpIncoming::from(listener)),
        );
        Self { address, calls }
    }

    /// Where the service listens, for `RateLimitFilter::new`.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[derive(Debug)]
struct Recorder {
    answer: Answer,
    calls: Arc<Mutex<Vec<Call>>>,
}

#[tonic::async_trait]
impl RateLimitService for Recorder {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        let request = request.into_inner();
        let descriptors: Vec<Descriptor> = request
            .descriptors
            .iter()
            .map(|descriptor| {
                descriptor
                    .entries
                    .iter()
                    .map(|entry| (entry.key.clone(), entry.value.clone()))
                    .collect()
            })
            .collect();
        let count = descriptors.len();
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Call {
                domain: request.domain,
                descriptors,
            });
        let status = match self.answer {
            Answer::Ok => DescriptorStatus {
                code: Code::Ok.into(),
                ..DescriptorStatus::default()
            },
            Answer::OverLimit => DescriptorStatus {
                code: Code::OverLimit.into(),
                current_limit: Some(RateLimit {
                    name: String::new(),
                    requests_per_unit: 10,
                    unit: Unit::Minute.into(),
                }),
                limit_remaining: 0,
                duration_until_reset: Some(Duration {
                    seconds: 30,
                    nanos: 0,
                }),
                ..DescriptorStatus::default()
            },
        };
        let overall = match self.answer {
            Answer::Ok => Code::Ok,
            Answer::OverLimit => Code::OverLimit,
        };
        Ok(Response::new(RateLimitResponse {
            overall_code: overall.into(),
            statuses: vec![status; count],
            ..RateLimitResponse::default()
        }))
    }
}
