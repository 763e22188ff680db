//! The script is loaded once and reloaded when the server has forgotten it (`NOSCRIPT` after a
//! restart, a failover to a replica that never saw it, or `SCRIPT FLUSH`).

mod common;

use tollgate_core::{Item, Key, Quota, Rate, RuleId, Store};
use tollgate_redis::RedisStore;

/// Whether this binary's server holds the store's script.
fn script_loaded() -> bool {
    let answer = common::server()
        .cli(&["script", "exists", RedisStore::script_sha()])
        .expect("redis-cli");
    answer.trim() == "1"
}

#[test]
fn a_flushed_script_is_reloaded_and_the_check_answers() {
    let store = common::server_time_store();
    let (rule, key) = (RuleId::new("reload").expect("id"), Key::new("user77"));
    let quota = Quota::token_bucket(2, Rate::per_minute(2)).expect("valid");
    let server = common::server();
    common::block_on(async {
        assert!(
            store
                .check_one(&Item::new(&rule, quota, &key))
                .await
                .expect("answers")
                .decision()
                .is_allowed()
        );
    });
    assert!(script_loaded(), "the first check loaded the script");
    server.cli(&["script", "flush"]).expect("redis-cli");
    assert!(!script_loaded());
    common::block_on(async {
        let answer = store.check_one(&Item::new(&rule, quota, &key)).await;
        let decision = *answer.expect("answers after reloading").decision();
        assert!(decision.is_allowed());
        assert_eq!(decision.remaining(), 0, "the count survived the flush");
    });
    assert!(script_loaded(), "the check loaded it again");
}
