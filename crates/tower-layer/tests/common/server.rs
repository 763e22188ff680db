//! A real axum server on a free loopback port.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use http::{HeaderMap, StatusCode};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// An axum server on 127.0.0.1 and a free port, handing each request its peer address as
/// `ConnectInfo<SocketAddr>`, with a client of its own; the server stops when this is dropped.
/// Test files add their own request helpers in `impl TestServer` blocks.
pub(crate) struct TestServer {
    base_url: String,
    task: JoinHandle<()>,
    /// The server's client (its own connection pool).
    pub(crate) client: reqwest::Client,
}

impl TestServer {
    /// Serves `app`, handing each request its peer both as axum's `ConnectInfo` (for handlers,
    /// and for the layer when built with its `axum` feature) and as a `PeerAddr` extension, the
    /// way a tower-only service supplies it: so the suite passes with and without the feature.
    pub(crate) async fn start(app: Router) -> TestServer {
        let app = app.layer(axum::middleware::map_request(
            |axum::extract::ConnectInfo(peer): axum::extract::ConnectInfo<SocketAddr>,
             mut request: axum::extract::Request| async move {
                request
                    .extensions_mut()
                    .insert(tollgate_tower::key::PeerAddr(peer));
                request
            },
        ));
        TestServer::start_with_connect_info_only(app).await
    }

    /// Serves `app` without telling it who the peer is (no `ConnectInfo`, no `PeerAddr`): a
    /// deployment mistake.
    #[allow(dead_code, reason = "not every test file serves without a peer")]
    pub(crate) async fn start_without_peer(app: Router) -> TestServer {
        let listener = bind().await;
        let addr = listener.local_addr().expect("the bound address");
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("the server runs");
        });
        TestServer::at(addr, task)
    }

    /// Serves `app` as an axum app is served, with `into_make_service_with_connect_info` and
    /// nothing else.
    pub(crate) async fn start_with_connect_info_only(app: Router) -> TestServer {
        let listener = bind().await;
        let addr = listener.local_addr().expect("the bound address");
        let service = app.into_make_service_with_connect_info::<SocketAddr>();
        let task = tokio::spawn(async move {
            axum::serve(listener, service)
                .await
                .expect("the server runs");
        });
        TestServer::at(addr, task)
    }

    fn at(addr: SocketAddr, task: JoinHandle<()>) -> TestServer {
        TestServer {
            base_url: format!("http://{addr}"),
            task,
            client: client(),
        }
    }

    /// The URL of `path` on this server.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn bind() -> TcpListener {
    TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port")
}

/// A client with its own connection pool that goes straight to loopback, whatever proxy the
/// environment names.
pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("a reqwest client")
}

/// What came back from a request: status, headers and the body as text.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: String,
}

impl Reply {
    /// Sends `request` and reads the whole answer.
    pub(crate) async fn send(request: reqwest::RequestBuilder) -> Reply {
        let response = request.send().await.expect("the server answers");
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.text().await.expect("a text body");
        Reply {
            status,
            headers,
            body,
        }
    }
}
