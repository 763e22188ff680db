//! Caller-controlled keys cannot collide, inject a hash tag, or move a rule's state (or a
//! refund's marker) to another slot: braces, colons, percent signs, binary and a 1 MB value, on
//! a real cluster.

mod common;

use std::collections::HashSet;

use tollgate_core::{Algorithm, Item, Key, Quota, Rate, RuleId, Store};
use tollgate_testing::ManualClock;
use tollgate_testing::conformance::START;

fn hostile_keys() -> Vec<Key> {
    vec![
        Key::new("user"),
        Key::new("{user}"),
        Key::new("{user"),
        Key::new("user}"),
        Key::new("}{"),
        Key::new("{}"),
        Key::new("%7Buser%7D"),
        Key::new("%7buser%7d"),
        Key::new("user:1"),
        Key::new("user%3A1"),
        Key::new(":"),
        Key::new("#"),
        Key::new([0u8, 255, 10, 13, 0x7b, 0x7d]),
        Key::new([0u8; 64]),
        Key::new(vec![b'{'; 1_000_000]),
        Key::new(vec![b'}'; 1_000_000]),
        Key::from_parts(&[b"user".as_slice(), b"1"]),
        Key::from_parts(&[b"user:".as_slice(), b"1"]),
        Key::global(),
    ]
}

#[test]
fn hostile_keys_each_get_their_own_count_on_a_cluster() {
    let store = common::cluster_store(ManualClock::new(START));
    let rule = RuleId::new("hostile").expect("id");
    let quota = Quota::token_bucket(1, Rate::per_minute(1)).expect("valid");
    let keys = hostile_keys();
    common::block_on(async {
        for key in &keys {
            let first = store.check_one(&Item::new(&rule, quota, key)).await;
            assert!(
                first
                    .expect("no CROSSSLOT or other error")
                    .decision()
                    .is_allowed(),
                "{key:?} shares a count with an earlier key"
            );
        }
        for key in &keys {
            let second = store.check_one(&Item::new(&rule, quota, key)).await;
            assert!(!second.expect("redis answers").decision().is_allowed());
        }
    });
}

/// Each hostile key's refund marker for a receipt id (every id takes 16 hex digits).
fn markers(store: &tollgate_redis::RedisStore, rule: &RuleId, id: u64) -> Vec<String> {
    hostile_keys()
        .iter()
        .map(|key| store.refund_marker_key(rule, key, id))
        .collect()
}

#[test]
fn stored_keys_are_distinct_short_and_carry_exactly_one_hash_tag() {
    let store = common::standalone_store(ManualClock::new(START));
    let rule = RuleId::new("hostile").expect("id");
    let names: Vec<String> = hostile_keys()
        .iter()
        .map(|key| {
            store
                .stored_key(&rule, key, Algorithm::TokenBucket)
                .expect("a known algorithm")
        })
        .collect();
    let distinct: HashSet<&String> = names.iter().collect();
    assert_eq!(distinct.len(), names.len(), "{names:#?}");
    for name in &names {
        assert!(name.len() <= 100, "{name} is {} bytes", name.len());
        assert_eq!(name.matches('{').count(), 1, "{name}");
        assert_eq!(name.matches('}').count(), 1, "{name}");
        assert!(name.ends_with('}'), "{name}");
        assert!(name.bytes().all(|byte| byte.is_ascii_graphic()), "{name}");
    }
    let markers = markers(&store, &rule, u64::MAX);
    let distinct: HashSet<&String> = markers.iter().chain(&names).collect();
    assert_eq!(distinct.len(), 2 * names.len(), "{markers:#?}");
    for (marker, name) in markers.iter().zip(&names) {
        assert!(marker.len() <= 100, "{marker} is {} bytes", marker.len());
        assert_eq!(marker.matches('{').count(), 1, "{marker}");
        assert_eq!(marker.matches('}').count(), 1, "{marker}");
        assert!(
            marker.bytes().all(|byte| byte.is_ascii_graphic()),
            "{marker}"
        );
        let tag =
            |name: &str| name[name.find('{').unwrap_or(0)..=name.find('}').unwrap_or(0)].to_owned();
        assert_eq!(
            tag(marker),
            tag(name),
            "{marker} shares the hash tag of {name}"
        );
    }
    assert_ne!(
        markers,
        self::markers(&store, &rule, 1),
        "the id is part of the name"
    );
}

#[test]
fn the_cluster_agrees_on_every_slot_and_a_rule_keeps_one_slot_per_key() {
    let store = common::cluster_store(ManualClock::new(START));
    let node = &common::cluster().nodes()[0];
    let rule = RuleId::new("hostile").expect("id");
    for key in hostile_keys() {
        let ours = store.slot(&rule, &key);
        for algorithm in [
            Algorithm::TokenBucket,
            Algorithm::FixedWindow,
            Algorithm::SlidingWindowCounter,
            Algorithm::SlidingWindowLog,
        ] {
            let name = store.stored_key(&rule, &key, algorithm).expect("known");
            let theirs = node.cli(&["cluster", "keyslot", &name]).expect("redis-cli");
            assert_eq!(theirs.trim(), ours.to_string(), "{name}");
        }
        let marker = store.refund_marker_key(&rule, &key, 0x0123_4567_89ab_cdef);
        let theirs = node
            .cli(&["cluster", "keyslot", &marker])
            .expect("redis-cli");
        assert_eq!(theirs.trim(), ours.to_string(), "{marker}");
    }
}

#[test]
fn a_key_that_looks_like_another_rules_key_does_not_share_its_count() {
    let store = common::standalone_store(ManualClock::new(START));
    let quota = Quota::token_bucket(1, Rate::per_minute(1)).expect("valid");
    let (login, login_x) = (
        RuleId::new("login").expect("id"),
        RuleId::new("login-x").expect("id"),
    );
    common::block_on(async {
        let first = store
            .check_one(&Item::new(&login_x, quota, &Key::new("y")))
            .await;
        assert!(first.expect("answers").decision().is_allowed());
        // "login" + "x:y"-ish keys must not land on "login-x" + "y".
        for key in [Key::new("-x:y"), Key::new("x:y"), Key::new(":y")] {
            let answer = store.check_one(&Item::new(&login, quota, &key)).await;
            assert!(answer.expect("answers").decision().is_allowed(), "{key:?}");
        }
    });
}
