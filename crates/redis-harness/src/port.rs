//! Finding a free loopback port for a server to listen on.

use std::net::{Ipv4Addr, TcpListener};

use crate::HarnessError;

/// A Redis Cluster node also listens on its port + 10000 (the cluster bus).
pub(crate) const CLUSTER_BUS_OFFSET: u16 = 10_000;

/// How many ports are tried before giving up.
const ATTEMPTS: usize = 64;

/// Asks the kernel for a free port on 127.0.0.1, then releases it for the server to take.
///
/// There is a window between releasing the port and the server binding it in which another
/// process may take it; the caller detects that ("Address already in use" in the server log)
/// and asks again. With `cluster_bus`, the port + 10000 must exist and be free too.
pub(crate) fn free_port(cluster_bus: bool) -> Result<u16, HarnessError> {
    let mut last_error = None;
    for _ in 0..ATTEMPTS {
        let listener = match TcpListener::bind((Ipv4Addr::LOCALHOST, 0)) {
            Ok(listener) => listener,
            Err(error) => {
                last_error = Some(error);
                continue;
            }
        };
        let port = match listener.local_addr() {
            Ok(address) => address.port(),
            Err(error) => {
                last_error = Some(error);
                continue;
            }
        };
        if !cluster_bus {
            return Ok(port);
        }
        let Some(bus) = port.checked_add(CLUSTER_BUS_OFFSET) else {
            continue;
        };
        if TcpListener::bind((Ipv4Addr::LOCALHOST, bus)).is_ok() {
            return Ok(port);
        }
    }
    let why = last_error.map_or_else(
        || {
            format!(
                "no port below {} with a free cluster bus port",
                u16::MAX - CLUSTER_BUS_OFFSET
            )
        },
        |error| error.to_string(),
    );
    Err(HarnessError::io(
        &format!("could not find a free loopback port in {ATTEMPTS} attempts"),
        &std::io::Error::other(why),
    ))
}
