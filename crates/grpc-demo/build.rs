//! Generates the feed service's messages, server and client from `proto/feed.proto`, with the
//! `protoc` that `protoc-bin-vendored` ships (nothing to install).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut config = prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    tonic_prost_build::configure().compile_with_config(
        config,
        &["proto/feed.proto"],
        &["proto"],
    )?;
    println!("cargo:rerun-if-changed=proto/feed.proto");
    Ok(())
}
