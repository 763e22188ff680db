//! The packed values of bucket and window states (`src/lua/state.lua`): they round-trip, each
//! state has exactly one encoding (a value cut short or with a byte too many is refused), what
//! the memory bench writes fits 12 bytes (Redis's 32-byte allocation for a short string), and a
//! value in the decimal text of the format before is still read and written back packed.

mod common;

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use tollgate_core::{Item, Key, Quota, Rate, RuleId, Store};
use tollgate_redis::RedisStore;
use tollgate_testing::ManualClock;
use tollgate_testing::conformance::START;

const PRELUDE: &str = include_str!("../src/lua/prelude.lua");
const STATE: &str = include_str!("../src/lua/state.lua");

const HOUR: Duration = Duration::from_secs(3_600);
const DAY: Duration = Duration::from_secs(86_400);
const HOUR_MICROS: u64 = 3_600_000_000;
const TWO_53: u64 = 1 << 53;

/// Packs a state of `kind` ('t', 'w' or 's') from its fields, as the script writes it.
const PACK: &str = "
local kind, f = ARGV[4], {}
for i = 5, #ARGV do f[#f + 1] = tonumber(ARGV[i]) end
if kind == 't' then return pack_state({fam = 't', tat = f[1], interval = f[2]}) end
if kind == 'w' then return pack_state({fam = 'w', start = f[1], length = f[2], count = f[3]}) end
return pack_state({fam = 's', start = f[1], length = f[2], previous = f[3], current = f[4]})
";

/// Reads a value of `kind` as the script does: its fields, or nil when it is not a state.
const UNPACK: &str = "return unpack_state(ARGV[4], ARGV[5])";

/// Runs the script's state code on a connection of the test's own.
struct Codec {
    connection: MultiplexedConnection,
    pack: redis::Script,
    unpack: redis::Script,
}

impl Codec {
    async fn new() -> Codec {
        let script = |body: &str| redis::Script::new(&format!("{PRELUDE}\n{STATE}\n{body}"));
        Codec {
            connection: common::direct_connection().await,
            pack: script(PACK),
            unpack: script(UNPACK),
        }
    }

    async fn pack(&mut self, kind: &str, fields: &[u64]) -> Vec<u8> {
        let mut invocation = self.pack.prepare_invoke();
        // The prelude reads ARGV[2] ("now") and ARGV[3] (slack).
        invocation.arg("test").arg(0).arg(0).arg(kind);
        for field in fields {
            invocation.arg(*field);
        }
        invocation
            .invoke_async(&mut self.connection)
            .await
            .expect("the script packs")
    }

    async fn unpack(&mut self, kind: &str, value: &[u8]) -> Option<Vec<u64>> {
        self.unpack
            .prepare_invoke()
            .arg("test")
            .arg(0)
            .arg(0)
            .arg(kind)
            .arg(value)
            .invoke_async(&mut self.connection)
            .await
            .expect("the script reads")
    }
}

/// States of every kind, at the edges of what is stored: times up to 2^53 − 1 µs, intervals
/// up to 2^52 µs (a split quota's), lengths in every unit, starts on and off their window's
/// boundaries, counts up to 2^40 (the largest limit).
fn states() -> Vec<(&'static str, Vec<u64>)> {
    let now = START.as_micros();
    let year = 366 * 86_400 * 1_000_000;
    let mut states = Vec::new();
    for tat in [1, now, now + 1, (1 << 52) - 1, TWO_53 - 1] {
        for interval in [
            1,
            999,
            1_000,
            360_000_000,
            59_000_000,
            86_400_000_000,
            year,
            (1 << 52) - 1,
            1 << 52,
        ] {
            states.push(("t", vec![tat, interval]));
        }
    }
    let lengths = [1, 1_300_000, 1_000_000, HOUR_MICROS, 86_400_000_000, year];
    for length in lengths {
        for start in [0, now / length * length, now / length * length + 1, now] {
            for count in [0, 1, 127, 128, 5_000, 1 << 40] {
                states.push(("w", vec![start, length, count]));
                states.push(("s", vec![start, length, count, 3]));
            }
        }
    }
    states
}

#[test]
fn every_state_reads_back_as_it_was_written() {
    common::block_on(async {
        let mut codec = Codec::new().await;
        for (kind, fields) in states() {
            let value = codec.pack(kind, &fields).await;
            assert!(value[0] < 0x20, "{kind} {fields:?}: {value:02x?}");
            let read = codec.unpack(kind, &value).await;
            assert_eq!(
                read.as_ref(),
                Some(&fields),
                "{kind} {fields:?}: {value:02x?}"
            );
        }
    });
}

/// One encoding per state: no part of a value, and no value with a byte added, reads as a
/// state of the same kind.
#[test]
fn a_packed_value_cut_short_or_extended_is_refused() {
    common::block_on(async {
        let mut codec = Codec::new().await;
        for (kind, fields) in states() {
            let value = codec.pack(kind, &fields).await;
            for end in 0..value.len() {
                let cut = &value[..end];
                assert_eq!(codec.unpack(kind, cut).await, None, "{kind}: {cut:02x?}");
            }
            for extra in [0x00, 0x01, 0x1f, 0x7f, 0x80, 0xff] {
                let longer = [&value[..], &[extra]].concat();
                assert_eq!(
                    codec.unpack(kind, &longer).await,
                    None,
                    "{kind}: {longer:02x?}"
                );
            }
        }
    });
}

/// The byte layout, spelled out: the memory bench's bucket (10 an hour) and a day's window.
#[test]
fn the_layout_is_the_documented_one() {
    common::block_on(async {
        let mut codec = Codec::new().await;
        let tat = 1_796_000_000_000_000u64;
        // 6 minutes: 6 × 4 + 3.
        let bucket = [&tat.to_be_bytes()[1..], &[0x1b]].concat();
        assert_eq!(codec.pack("t", &[tat, 360_000_000]).await, bucket);

        let day = 86_400_000_000;
        let start = tat / day * day;
        // 1,440 minutes: 1,440 × 4 + 3.
        let window = [
            &[0x01][..],
            &common::varint(start / day),
            &common::varint(1_440 * 4 + 3),
            &common::varint(5_000),
        ];
        assert_eq!(codec.pack("w", &[start, day, 5_000]).await, window.concat());
        assert_eq!(window.concat().len(), 8);

        // Off the boundary: form 2, the start in µs.
        let window = [
            &[0x02][..],
            &common::varint(start + 7),
            &common::varint(1_440 * 4 + 3),
            &common::varint(5_000),
        ];
        assert_eq!(
            codec.pack("w", &[start + 7, day, 5_000]).await,
            window.concat()
        );
    });
}

/// The decimal text of the format before is still read, with the same bounds as before.
#[test]
fn decimal_values_are_still_read() {
    common::block_on(async {
        let mut codec = Codec::new().await;
        let read = [
            (
                "t",
                "1796000000000000:360000000",
                Some(vec![1_796_000_000_000_000, 360_000_000]),
            ),
            ("t", "9007199254740991:1", Some(vec![TWO_53 - 1, 1])),
            ("t", "9007199254740992:1", None),
            ("t", "5:0", None),
            ("t", "5:1:2", None),
            (
                "w",
                "1796000000000000:3600000000:4",
                Some(vec![1_796_000_000_000_000, HOUR_MICROS, 4]),
            ),
            ("w", "1796000000000000:0:4", None),
            ("w", "1:1:9007199254740992", None),
            ("s", "1:3600000000:2:3", Some(vec![1, HOUR_MICROS, 2, 3])),
            ("s", "1:3600000000:2", None),
        ];
        for (kind, value, expected) in read {
            assert_eq!(
                codec.unpack(kind, value.as_bytes()).await,
                expected,
                "{kind} {value}"
            );
        }
    });
}

fn rule(id: &str) -> RuleId {
    RuleId::new(id).expect("a valid rule id")
}

/// Sets `old` (decimal text) at the state key of `quota` for a caller, checks once at `clock`,
/// and answers what remained and what the key holds afterwards.
async fn check_on_old_value(
    store: &RedisStore,
    quota: Quota,
    old: String,
) -> (u64, Option<Vec<u8>>) {
    let (rule, key) = (rule("older"), Key::new("user77"));
    let name = store
        .stored_key(&rule, &key, quota.algorithm())
        .expect("a stored key");
    common::set_bytes(&name, old.as_bytes()).await;
    let answer = store
        .check_one(&Item::new(&rule, quota, &key))
        .await
        .expect("an older value is read");
    assert!(answer.decision().is_allowed(), "{quota:?} on {old}");
    (
        answer.decision().remaining(),
        common::get_bytes(&name).await,
    )
}

/// A bucket written under another interval (5 an hour, two owed) keeps its debt in the new
/// quota's terms (two of 10 an hour), and is written back packed.
#[test]
fn an_older_decimal_bucket_is_read_and_written_back_packed() {
    let store = common::standalone_store(ManualClock::new(START));
    let now = START.as_micros();
    let quota = Quota::token_bucket(10, Rate::per_hour(10)).expect("valid");
    let old = format!("{}:720000000", now + 2 * 720_000_000);
    let (remaining, value) = common::block_on(check_on_old_value(&store, quota, old));
    assert_eq!(remaining, 7, "two owed and one taken of ten");
    let tat = now + 3 * 360_000_000;
    let packed = [&tat.to_be_bytes()[1..], &[0x1b]].concat();
    assert_eq!(value, Some(packed));
}

/// A day's window that began now holds 4 under a quota of an hour's windows (the windows
/// overlap, so the count carries over), and is written back packed in the hour's terms.
#[test]
fn an_older_decimal_fixed_window_is_read_and_written_back_packed() {
    let store = common::standalone_store(ManualClock::new(START));
    let now = START.as_micros();
    let quota = Quota::fixed_window(10, HOUR).expect("valid");
    let old = format!("{now}:86400000000:4");
    let (remaining, value) = common::block_on(check_on_old_value(&store, quota, old));
    assert_eq!(remaining, 5, "four counted and one taken of ten");
    // 60 minutes: 60 × 4 + 3.
    let packed = [
        &[0x01][..],
        &common::varint(now / HOUR_MICROS),
        &common::varint(243),
        &[0x05],
    ];
    assert_eq!(value, Some(packed.concat()));
}

/// A sliding counter whose window was the previous hour's (6 counted) weighs half of it half an
/// hour into this one, and is written back packed with the windows rolled.
#[test]
fn an_older_decimal_sliding_counter_is_read_and_written_back_packed() {
    let clock = ManualClock::new(START);
    clock.advance(HOUR / 2);
    let store = common::standalone_store(clock);
    let now = START.as_micros();
    let quota = Quota::sliding_window_counter(10, HOUR).expect("valid");
    let old = format!("{}:3600000000:0:6", now - HOUR_MICROS);
    let (remaining, value) = common::block_on(check_on_old_value(&store, quota, old));
    assert_eq!(remaining, 6, "half of 6 weighed in, one taken, of ten");
    let packed = [
        &[0x01][..],
        &common::varint(now / HOUR_MICROS),
        &common::varint(243),
        &[0x06, 0x01],
    ];
    assert_eq!(value, Some(packed.concat()));
}

/// The error on a value that is neither packed nor decimal names both formats.
#[test]
fn the_error_on_a_foreign_value_names_the_packed_format() {
    let store = common::standalone_store(ManualClock::new(START));
    let quota = Quota::token_bucket(10, Rate::per_hour(10)).expect("valid");
    let (rule, key) = (rule("foreign"), Key::new("user77"));
    let name = store
        .stored_key(&rule, &key, quota.algorithm())
        .expect("a stored key");
    let message = common::block_on(async {
        common::set_bytes(&name, &[0x06, 0x61]).await;
        let error = store
            .check_one(&Item::new(&rule, quota, &key))
            .await
            .expect_err("a foreign value is an error");
        error.to_string()
    });
    assert!(
        message.contains("7 bytes of TAT then the interval, packed")
            && message.contains("\"tat:interval\""),
        "{message}"
    );
}

/// What the memory bench writes (on the server's clock, so today's times) takes at most 12
/// bytes: Redis keeps it with its object in one 32-byte allocation.
#[test]
fn the_memory_benchs_values_fit_twelve_bytes() {
    let store = common::server_time_store();
    let quotas = [
        Quota::token_bucket(10, Rate::per_hour(10)),
        Quota::gcra(Rate::per_hour(10), 10),
        Quota::fixed_window(10, DAY),
        Quota::sliding_window_counter(10, DAY),
        Quota::leaky_bucket(Rate::per_hour(10), HOUR),
        Quota::fixed_window(5_000, Duration::from_secs(60)),
        Quota::sliding_window_counter(5_000, Duration::from_secs(1)),
    ];
    for (i, quota) in quotas.into_iter().enumerate() {
        let quota = quota.expect("valid");
        let (rule, key) = (rule(&format!("bench{i}")), Key::new("user100000"));
        let name = store
            .stored_key(&rule, &key, quota.algorithm())
            .expect("a stored key");
        let value = common::block_on(async {
            let item = Item::new(&rule, quota, &key).with_cost(quota.limit() / 2 + 1);
            let answer = store.check_one(&item).await.expect("answers");
            assert!(answer.decision().is_allowed());
            common::get_bytes(&name).await.expect("a value")
        });
        assert!(value.len() <= 12, "{quota:?}: {value:02x?}");
    }
}
