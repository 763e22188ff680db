//! A key holding something tollgate did not write (set by hand, by another program, by a
//! version whose format this one does not read) is an error, never "no state": reading it as
//! absent would hand the caller a fresh quota.

mod common;

use std::time::Duration;

use tollgate_core::{Item, Key, Quota, Rate, RuleId, Store};
use tollgate_redis::RedisStore;
use tollgate_testing::ManualClock;
use tollgate_testing::conformance::START;

fn cli(args: &[&str]) -> String {
    common::server().cli(args).expect("redis-cli answers")
}

/// How a test puts something foreign at a state's key.
enum Overwrite<'a> {
    /// redis-cli words, the key's name after the first.
    Cli(&'a [&'a str]),
    /// `SET <key> <bytes>`, for values redis-cli's arguments cannot carry.
    Bytes(&'a [u8]),
}

/// Spends `quota` for one caller, then overwrites its state's key and checks again: the check
/// fails with an error naming the key, and a refund of an earlier charge fails the same way.
fn overwritten_state_is_an_error(rule: &str, quota: Quota, overwrite: Overwrite<'_>) {
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
        match overwrite {
            Overwrite::Cli(command) => {
                let mut words = vec![command[0], name.as_str()];
                words.extend_from_slice(&command[1..]);
                cli(&words);
            }
            Overwrite::Bytes(value) => common::set_bytes(&name, value).await,
        }

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
        overwritten_state_is_an_error(
            &format!("foreign-t{i}"),
            quota,
            Overwrite::Cli(&["set", value]),
        );
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
        overwritten_state_is_an_error(
            &format!("foreign-w{i}"),
            quota,
            Overwrite::Cli(&["set", "not-a-state"]),
        );
    }
}

/// A member in another shape scored above every real entry would hide them all: the log would
/// read as empty on every check, for the key's whole life.
#[test]
fn a_foreign_member_in_a_log_is_an_error_not_an_empty_log() {
    let quota = Quota::sliding_window_log(3, Duration::from_secs(3600)).expect("valid");
    overwritten_state_is_an_error(
        "foreign-l",
        quota,
        Overwrite::Cli(&["zadd", "9999999999999999", "junk"]),
    );
}

/// `parts` one after the other.
fn joined(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// Binary values that look packed (a first byte below 0x20) but are not a bucket's state: cut
/// short, an interval of 0, a byte too many, a number longer or in a smaller unit than its one
/// encoding. Each is refused rather than read as some bucket.
#[test]
fn binary_garbage_at_a_bucket_key_is_an_error_not_a_misread_bucket() {
    let quota = Quota::token_bucket(3, Rate::per_hour(3)).expect("valid");
    let tat = (START.as_micros() + 1_000).to_be_bytes();
    let tat: &[u8] = &tat[1..];
    let values = [
        joined(&[tat]),
        joined(&[&tat[..6], &[0x1b]]),
        joined(&[tat, &[0x00]]),
        joined(&[tat, &[0x03]]),
        joined(&[tat, &[0x1b, 0x00]]),
        joined(&[tat, &[0x9b]]),
        joined(&[tat, &[0x9b, 0x00]]),
        // 1,200 s in seconds (1,200 × 4 + 2): a whole number of minutes has one encoding.
        joined(&[tat, &common::varint(1_200 * 4 + 2)]),
        // A varint of 9 bytes, past 2^53.
        joined(&[tat, &[0xff; 8], &[0x01]]),
        vec![0xff; 8],
        vec![0x00; 8],
    ];
    for (i, value) in values.iter().enumerate() {
        overwritten_state_is_an_error(&format!("foreign-tb{i}"), quota, Overwrite::Bytes(value));
    }
}

/// The same for windows: a form byte other than 1 or 2, a start in µs on a window boundary (it
/// has one encoding: counted in lengths), a length of 0, a start past 2^53 µs, a count missing,
/// cut short or followed by a byte too many; and a fixed window's value at a sliding counter's
/// key (one count short).
#[test]
fn binary_garbage_at_a_window_key_is_an_error_not_a_misread_window() {
    let hour = Duration::from_secs(3_600);
    let index = common::varint(START.as_micros() / 3_600_000_000);
    let start = common::varint(START.as_micros());
    // 60 minutes: 60 × 4 + 3.
    let length: &[u8] = &[0xf3, 0x01];
    let fixed = [
        joined(&[&[0x03], &index, length, &[0x01]]),
        joined(&[&[0x00], &index, length, &[0x01]]),
        joined(&[&[0x02], &start, length, &[0x01]]),
        joined(&[&[0x01], &index, &[0x00], &[0x01]]),
        joined(&[&[0x01], &common::varint(1 << 52), length, &[0x01]]),
        joined(&[&[0x01], &index, length]),
        joined(&[&[0x01], &index, length, &[0x81]]),
        joined(&[&[0x01], &index, length, &[0x01, 0x00]]),
    ];
    let quota = Quota::fixed_window(3, hour).expect("valid");
    for (i, value) in fixed.iter().enumerate() {
        overwritten_state_is_an_error(&format!("foreign-wb{i}"), quota, Overwrite::Bytes(value));
    }
    let sliding = [
        joined(&[&[0x01], &index, length, &[0x01]]),
        joined(&[&[0x01], &index, length, &[0x01, 0x01, 0x01]]),
        joined(&[&[0x05], &index, length, &[0x01, 0x01]]),
    ];
    let quota = Quota::sliding_window_counter(3, hour).expect("valid");
    for (i, value) in sliding.iter().enumerate() {
        overwritten_state_is_an_error(&format!("foreign-sb{i}"), quota, Overwrite::Bytes(value));
    }
}
