//! A key holding something tollgate did not write (set by hand, by another program, by a
//! version whose format this one does not read) is an error, never "no state": reading it as
//! absent would hand the caller a fresh quota.

mod common;

use std::time::Duration;

use tollgate_core::testing::ManualClock;
use tollgate_core::testing::conformance::START;
use tollgate_core::{Item, Key, Quota, Rate, RuleId, Store};
use tollgate_redis::RedisStore;

fn cli(args: &[&str]) -> String {
    common::server().cli(args).expect("redis-cli answers")
}

/// Spends `quota` for one caller, then runs `command` on its state's key (redis-cli words, the
/// key's name after the first) and checks again: the check fails with an error naming the key,
/// and a refund of an earlier charge fails the same way.
fn overwritten_state_is_an_error(rule: &str, quota: Quota, command: &[&str]) {
    let clock = ManualClock::new(START);
    let store: RedisStore = common::standalone_store(clock.clone());
    let rule = RuleId::new(rule).expect("a valid rule id");
    let key = Key::new("caller");
    let item = Item::new(&rule, quota, &key);
    common::block_on(async {
        let mut receipt = None;
        for _ in 0..quota.limit() {
            let answer = store.check_one(&item).await.expect("the store answers");
            assert!(answer.decision().is_allowed());
            receipt = answer.into_receipt(&item);
        }
        let refused = store.check_one(&item).await.expect("the store answers");
        assert!(!refused.decision().is_allowed(), "{quota:?} is spent");

        let name = store
            .stored_key(&rule, &key, quota.algorithm())
            .expect("a key");
        let mut words = vec![command[0], name.as_str()];
        words.extend_from_slice(&command[1..]);
        cli(&words);

        let error = store
            .check_one(&item)
            .await
            .expect_err("an unreadable state is an error");
        let message = error.to_string();
        assert!(
            message.contains("not a tollgate state") && message.contains(&name),
            "{message}"
        );

        let receipt = receipt.expect("the last allowed check charged");
        let failed = store
            .refund(receipt)
            .await
            .expect_err("a refund on it fails too");
        assert!(
            failed.to_string().contains("not a tollgate state"),
            "{failed}"
        );
    });
}

#[test]
fn garbage_at_a_bucket_key_is_an_error_not_a_fresh_bucket() {
    let quota = Quota::token_bucket(3, Rate::per_hour(3)).expect("valid");
    for (i, value) in ["garbage", "1.5e15:1200000000", "-1:1", " 1:1", "5:0", ""]
        .iter()
        .enumerate()
    {
        overwritten_state_is_an_error(&format!("foreign-t{i}"), quota, &["set", value]);
    }
}

#[test]
fn garbage_at_a_window_key_is_an_error_not_a_fresh_window() {
    let hour = Duration::from_secs(3600);
    let windows = [
        Quota::fixed_window(3, hour).expect("valid"),
        Quota::sliding_window_counter(3, hour).expect("valid"),
    ];
    for (i, quota) in windows.into_iter().enumerate() {
        overwritten_state_is_an_error(&format!("foreign-w{i}"), quota, &["set", "not-a-state"]);
    }
}

/// A member in another shape scored above every real entry would hide them all: the log would
/// read as empty on every check, for the key's whole life.
#[test]
fn a_foreign_member_in_a_log_is_an_error_not_an_empty_log() {
    let quota = Quota::sliding_window_log(3, Duration::from_secs(3600)).expect("valid");
    overwritten_state_is_an_error("foreign-l", quota, &["zadd", "9999999999999999", "junk"]);
}
