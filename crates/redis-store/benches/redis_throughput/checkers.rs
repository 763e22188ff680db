//! The two ways a check is sent: through tollgate, and as the bare `EVALSHA` on a redis-rs
//! connection (the open loop's baseline).

use std::future::Future;
use std::sync::Arc;

use redis::aio::MultiplexedConnection;
use tollgate_core::Store;
use tollgate_redis::RedisStore;

use crate::load::Checker;
use crate::workload::Workload;

/// `Store::check_one` on a shared [`RedisStore`].
#[derive(Clone)]
pub(crate) struct Tollgate {
    pub(crate) store: RedisStore,
    pub(crate) workload: Arc<Workload>,
}

impl Checker for Tollgate {
    fn check(&self, pick: u64) -> impl Future<Output = ()> + Send + 'static {
        let this = self.clone();
        async move {
            let answer = this
                .store
                .check_one(&this.workload.item(pick))
                .await
                .unwrap_or_else(|error| panic!("the redis store failed a check: {error}"));
            assert!(
                answer.decision().is_allowed(),
                "the bench's quota allows every check"
            );
        }
    }
}

/// The `EVALSHA` that `check_one` sends, built by the bench and sent on a plain redis-rs
/// multiplexed connection: the same server work without tollgate's client side (its
/// `ConnectionManager`, argument building and answer decoding).
#[derive(Clone)]
pub(crate) struct Bare {
    pub(crate) connection: MultiplexedConnection,
    pub(crate) store: RedisStore,
    pub(crate) workload: Arc<Workload>,
}

impl Checker for Bare {
    fn check(&self, pick: u64) -> impl Future<Output = ()> + Send + 'static {
        let mut command = redis::cmd("EVALSHA");
        for arg in self
            .workload
            .eval_args(&self.workload.stored_key(&self.store, pick))
        {
            command.arg(arg);
        }
        let mut connection = self.connection.clone();
        async move {
            let answer: Vec<i64> = command
                .query_async(&mut connection)
                .await
                .unwrap_or_else(|error| panic!("a bare EVALSHA failed: {error}"));
            assert_eq!(
                answer.first(),
                Some(&1),
                "the bench's quota allows every check"
            );
        }
    }
}
