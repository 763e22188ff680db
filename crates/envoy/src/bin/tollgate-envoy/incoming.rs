//! The connections the gRPC server accepts: `TCP_NODELAY` on, and answers written together.
//!
//! (Also compiled into `examples/rls_bench_server.rs`, so the bench serves as the binary does.)
//!
//! * **`TCP_NODELAY`.** tonic sets it on the connections of a server it binds itself, not on an
//!   incoming stream it is given. Without it, Nagle's algorithm holds an answer's last small
//!   write until the caller acknowledges the one before — up to the caller's delayed ACK, some
//!   40 ms on Linux, on some answers (`scripts/bench-envoy --transport plain` shows it).
//! * **Not vectored.** hyper's HTTP/2 (the `h2` crate) writes a DATA payload of 256 bytes or
//!   more by itself, in a `writev` of its own, when the connection says it can write vectored:
//!   one system call per answer of that size. An answer to three descriptors with its
//!   `RateLimit` fields is about 330 bytes. Told the connection cannot write vectored, h2
//!   copies payloads under 1 KiB into its write buffer, and the answers ready together leave in
//!   one write (`scripts/bench-envoy --transport tonic` serves as tonic does, vectored).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_stream::{Stream, StreamExt};
use tonic::transport::server::{Connected, TcpConnectInfo, TcpIncoming};

/// The connections `listener` accepts, as the server serves them.
pub(crate) fn incoming(
    listener: TcpListener,
) -> impl Stream<Item = io::Result<Accepted>> + Send + 'static {
    TcpIncoming::from(listener)
        .with_nodelay(Some(true))
        .map(|accepted| accepted.map(Accepted))
}

/// An accepted connection that does not write vectored (see the module's documentation).
pub(crate) struct Accepted(TcpStream);

impl AsyncRead for Accepted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Accepted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }

    /// What this type is for: h2 then buffers small payloads and writes them together.
    fn is_write_vectored(&self) -> bool {
        false
    }
}

impl Connected for Accepted {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.0.connect_info()
    }
}
