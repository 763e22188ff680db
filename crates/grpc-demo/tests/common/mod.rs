//! The demo's service with the demo's own rules, over a store whose clock stands still: a
//! refused call's wait is then its rule's whole refill interval, however long the calls before
//! it took on a busy machine.

use std::net::SocketAddr;

use tollgate::config::{Extractors, RuleFile};
use tollgate::tower::RateLimitLayer;
use tollgate::{Clock, MemoryStore, Timestamp};

/// A clock that reads one instant, always.
struct Standing;

impl Clock for Standing {
    fn now(&self) -> Timestamp {
        Timestamp::from_secs(1_700_000_000)
    }
}

/// Serves the feed service behind `rules.toml` (read as `tollgate_grpc_demo::limits` reads it),
/// counted at a standing clock, on 127.0.0.1:0; its address.
pub(crate) async fn serve_at_a_standing_clock() -> SocketAddr {
    let file = RuleFile::parse("rules.toml", tollgate_grpc_demo::RULES, &Extractors::new())
        .expect("the demo's rules");
    let layer = RateLimitLayer::new(MemoryStore::builder().clock(Standing).build());
    layer
        .handle()
        .replace_rules(file.into_rules())
        .expect("memory counts the demo's rules");
    let (listener, address) = tollgate_grpc_demo::bind(0).await.expect("a free port");
    tokio::spawn(tollgate_grpc_demo::serve_with(listener, layer));
    address
}
