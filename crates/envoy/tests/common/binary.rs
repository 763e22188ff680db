//! The `tollgate-envoy` binary as a real process: started with `serve --listen 127.0.0.1:0`,
//! the addresses it prints read from its standard output, and stopped by its process id.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use tollgate_envoy::envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;

/// The binary cargo built for this test.
pub const BINARY: &str = env!("CARGO_BIN_EXE_tollgate-envoy");

/// A running `tollgate-envoy serve`, and the addresses it printed.
pub struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
    pub grpc: SocketAddr,
    pub metrics: Option<SocketAddr>,
}

impl Running {
    /// Starts `serve` with `args` (and `--listen 127.0.0.1:0`), waiting for the addresses it
    /// prints (or its exit).
    pub fn start(args: &[&str]) -> Running {
        let mut child = Command::new(BINARY)
            .arg("serve")
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start tollgate-envoy");
        let stdout = child.stdout.take().expect("its stdout");
        let (tell, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tell.send(line);
            }
        });
        let (mut grpc, mut metrics) = (None, None);
        while grpc.is_none() {
            let line = lines
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| {
                    panic!(
                        "tollgate-envoy printed no address; exit {:?}",
                        child.try_wait()
                    )
                });
            let address = || line.rsplit(' ').next().and_then(|text| text.parse().ok());
            if line.contains("rate limit service (and quota service) on") {
                grpc = address();
            } else if line.contains("/metrics on") {
                metrics = address();
            }
        }
        Running {
            child,
            lines,
            grpc: grpc.expect("the gRPC address"),
            metrics,
        }
    }

    /// A client of its rate limit service.
    pub async fn client(&self) -> RateLimitServiceClient<tonic::transport::Channel> {
        RateLimitServiceClient::connect(format!("http://{}", self.grpc))
            .await
            .expect("connect to tollgate-envoy")
    }

    /// Sends `signal` (`-HUP`, `-TERM`, ...) by its process id.
    pub fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(sent.success());
    }

    /// Whether it is still running.
    pub fn alive(&mut self) -> bool {
        self.exited().is_none()
    }

    /// Its exit status, if it has exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().expect("wait")
    }

    /// The lines it printed and that were not read yet.
    pub fn printed(&self) -> Vec<String> {
        self.lines.try_iter().collect()
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, by its process id, and waits for it to exit: its port stops answering at once.
    pub fn kill(&mut self) {
        self.child.kill().expect("kill tollgate-envoy");
        self.child.wait().expect("its exit");
    }

    /// SIGTERM, then its exit status and what it printed after.
    pub fn terminate(mut self) -> (std::process::ExitStatus, Vec<String>) {
        self.signal("-TERM");
        let status = self.child.wait().expect("its exit");
        (status, self.printed())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes `text` to `path` as an editor or a ConfigMap replaces a file: written beside, then
/// renamed over it.
pub fn write(path: &Path, text: &str) {
    let temporary = path.with_extension("tmp");
    std::fs::write(&temporary, text).expect("write the rule file");
    std::fs::rename(&temporary, path).expect("replace the rule file");
}
