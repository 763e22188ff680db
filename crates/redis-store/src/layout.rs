//! The one place that names every stored key.
//!
//! ```text
//! <prefix>:<format><version>:{<rule id>:<caller key, escaped>}
//! tg:t2:{login:%06user77}
//! <prefix>:r1:{<rule id>:<caller key, escaped>}:<receipt id, 16 hex digits>
//! tg:r1:{login:%06user77}:00c0ffee00c0ffee
//! <prefix>:d1:{<rule id>:<caller key, escaped>}
//! tg:d1:{partner:acme}
//! ```
//!
//! * The **hash tag** (between `{` and `}`) is the rule id and the caller's key, so one rule's
//!   state for one key lives in one Redis Cluster slot, and every format of it in the same one.
//! * The caller's key is escaped: `%`, `{`, `}`, `#` and every byte outside printable ASCII
//!   become `%XX`, so a caller can neither end the hash tag early, start another, nor make two
//!   different keys look alike. Rule ids cannot contain `:`, so the rule and key never blur.
//! * An escaped key longer than 64 bytes is replaced by `#` and the hex of the first 16 bytes of
//!   its SHA-256 (`#` never appears raw, so a digest cannot equal a short key).
//! * The **format tag** names the state's shape (`t` timestamp, `w` fixed window, `s` sliding
//!   counter, `l` log, `c` concurrency slots) and its version, so state written by another algorithm or an older
//!   layout is never read as this one. A new version is a new key: during a rolling upgrade,
//!   gateways of the old and the new version count in separate keys (a caller may get up to
//!   twice its quota for one window, once from each), and the old keys expire by themselves.
//! * A **refund marker** (`r`) remembers, for as long as the charge could matter, that a
//!   receipt was refunded, so a retried refund gives back once. It shares the state's hash tag,
//!   so one script execution (and one cluster slot) holds both.
//! * A **debt** (`d`) holds the units a caller owes past its limit (`tollgate_core::Take`),
//!   beside its state in the same slot, and expires when the debt lapses.

use std::fmt::Write as _;

use sha2::{Digest, Sha256};
use tollgate_core::{Algorithm, Key, RuleId};

/// Escaped keys longer than this are hashed.
const MAX_ESCAPED_KEY: usize = 64;

/// How one algorithm's state is stored; each has its own key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StateFormat {
    /// One theoretical arrival time (token bucket, GCRA, pacing).
    Timestamp,
    /// Window number and count.
    FixedWindow,
    /// Window number and two counts.
    SlidingCounter,
    /// A sorted set of charges.
    Log,
    /// A sorted set of the concurrency slots held.
    Slots,
}

impl StateFormat {
    /// Every format, for operations that clear all of a caller's state.
    pub(crate) const ALL: [StateFormat; 5] = [
        StateFormat::Timestamp,
        StateFormat::FixedWindow,
        StateFormat::SlidingCounter,
        StateFormat::Log,
        StateFormat::Slots,
    ];

    /// The format an algorithm's state is kept in, if this store knows it.
    pub(crate) fn of(algorithm: Algorithm) -> Option<StateFormat> {
        match algorithm {
            Algorithm::TokenBucket | Algorithm::LeakyBucket => Some(StateFormat::Timestamp),
            Algorithm::FixedWindow => Some(StateFormat::FixedWindow),
            Algorithm::SlidingWindowCounter => Some(StateFormat::SlidingCounter),
            Algorithm::SlidingWindowLog => Some(StateFormat::Log),
            Algorithm::Concurrency => Some(StateFormat::Slots),
            _ => None,
        }
    }

    /// The format's letter and version: bump a version when its encoding changes in a way this
    /// version cannot read the old encoding of (`t2`, `w2` and `s2` went from decimal text to
    /// packed bytes and kept their names, since the script reads both; see `lua/state.lua`).
    fn tag(self) -> &'static str {
        match self {
            // 2: the TAT and the emission interval it was written under ("tat:interval" in
            // decimal, now packed).
            StateFormat::Timestamp => "t2",
            // 2: start, length (µs) and count ("start:length:count" in decimal, now packed;
            // 1 was "window number:count").
            StateFormat::FixedWindow => "w2",
            // 2: start, length, previous and current count ("start:length:previous:current" in
            // decimal, now packed).
            StateFormat::SlidingCounter => "s2",
            // 2: members carry a running total ("at:cost:cumulative"); 3: the expiry follows
            // the window of the latest check, which may have grown.
            StateFormat::Log => "l3",
            // 1: one member per slot held, "<hold id>:<n>", scored by when it lapses.
            StateFormat::Slots => "c1",
        }
    }
}

/// The refund markers' tag and version.
const MARKER_TAG: &str = "r1";

/// The debt keys' tag and version: "owed:lapses_at", units and µs.
const DEBT_TAG: &str = "d1";

/// Names stored keys under one prefix.
#[derive(Debug, Clone)]
pub(crate) struct KeyLayout {
    prefix: String,
}

impl KeyLayout {
    /// A layout under `prefix` (already validated by the builder).
    pub(crate) fn new(prefix: String) -> Self {
        KeyLayout { prefix }
    }

    /// The stored key of `rule`'s state for `key` in `format`.
    pub(crate) fn key(&self, format: StateFormat, rule: &RuleId, key: &Key) -> String {
        self.name(format.tag(), rule, key, 0)
    }

    /// The key holding what `key` owes `rule` past its limit.
    pub(crate) fn debt(&self, rule: &RuleId, key: &Key) -> String {
        self.name(DEBT_TAG, rule, key, 0)
    }

    /// The channel resets are announced on: `<prefix>:resets` (see
    /// [`ResetFollower`](crate::ResetFollower)).
    pub(crate) fn resets_channel(&self) -> String {
        format!("{}:resets", self.prefix)
    }

    /// The refund marker of receipt `id` for `rule`'s state for `key`: the state's hash tag,
    /// so it lives in the state's slot.
    pub(crate) fn marker(&self, rule: &RuleId, key: &Key, id: u64) -> String {
        let mut name = self.name(MARKER_TAG, rule, key, 17);
        let _ = write!(name, ":{id:016x}");
        name
    }

    /// `<prefix>:<tag>:{<hash tag>}`, with room for `extra` more bytes.
    fn name(&self, tag: &str, rule: &RuleId, key: &Key, extra: usize) -> String {
        let hash_tag = hash_tag(rule, key);
        let mut name =
            String::with_capacity(self.prefix.len() + tag.len() + hash_tag.len() + 4 + extra);
        name.push_str(&self.prefix);
        name.push(':');
        name.push_str(tag);
        name.push_str(":{");
        name.push_str(&hash_tag);
        name.push('}');
        name
    }
}

/// Whether `prefix` can start every stored key: 1 to 64 bytes of `A-Z a-z 0-9 _ - . :`.
pub(crate) fn is_valid_prefix(prefix: &str) -> bool {
    (1..=64).contains(&prefix.len())
        && prefix
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b"_-.:".contains(&byte))
}

/// The hash tag's content: the rule id, `:`, and the escaped (or hashed) key.
fn hash_tag(rule: &RuleId, key: &Key) -> String {
    let mut tag = String::with_capacity(rule.as_str().len() + 1 + key.as_bytes().len());
    tag.push_str(rule.as_str());
    tag.push(':');
    let start = tag.len();
    for &byte in key.as_bytes() {
        if is_kept(byte) {
            tag.push(char::from(byte));
        } else {
            let _ = write!(tag, "%{byte:02X}");
        }
    }
    if tag.len() - start > MAX_ESCAPED_KEY {
        tag.truncate(start);
        tag.push('#');
        for byte in &Sha256::digest(key.as_bytes())[..16] {
            let _ = write!(tag, "{byte:02x}");
        }
    }
    if let Some((index, of)) = sub_bucket_of(rule) {
        spread_over_slots(&mut tag, index, of);
    }
    tag
}

/// A sub-bucket's rule id (`<id>#<index>.<of>`, see `RuleId::sub_bucket`): its index and count.
fn sub_bucket_of(rule: &RuleId) -> Option<(u32, u32)> {
    let (_, spread) = rule.as_str().rsplit_once('#')?;
    let (index, of) = spread.split_once('.')?;
    Some((index.parse().ok()?, of.parse().ok()?))
}

/// The most salts tried for one sub-bucket's tag, each a CRC16 of the tag on every check: about
/// S tries are expected for a part of S, so spreads of up to 256 are placed exactly (a few µs
/// at most); past it a tag stays unsalted, placed by chance — which, with that many
/// sub-buckets, reaches every master anyway.
const MAX_SALTS: u32 = 256;

/// Salts sub-bucket `index` of `of`'s hash tag with the first `#<n>` (none, then 1, 2, ...)
/// that puts it in part `index` of `of` equal parts of the 16,384 slots, so the sub-buckets of
/// one key reach every master of a cluster with evenly shared slots. `#` never appears in an
/// escaped key but as a long key's digest mark (`:#<32 hex>`), so a salted tag is unambiguous;
/// every gateway finds the same salt.
fn spread_over_slots(tag: &mut String, index: u32, of: u32) {
    let of = of.clamp(1, 16_384);
    let low = u64::from(index.min(of - 1)) * 16_384 / u64::from(of);
    let high = (u64::from(index.min(of - 1)) + 1) * 16_384 / u64::from(of);
    let in_part = |tag: &str| (low..high).contains(&u64::from(crc16_slot(tag)));
    if in_part(tag) {
        return;
    }
    let unsalted = tag.len();
    for salt in 1..=MAX_SALTS {
        tag.truncate(unsalted);
        let _ = write!(tag, "#{salt}");
        if in_part(tag) {
            return;
        }
    }
    tag.truncate(unsalted);
}

/// The slot of a hash tag's content.
fn crc16_slot(tag: &str) -> u16 {
    crc16::State::<crc16::XMODEM>::calculate(tag.as_bytes()) % 16_384
}

fn is_kept(byte: u8) -> bool {
    (0x21..=0x7e).contains(&byte) && !b"%{}#".contains(&byte)
}

/// The Redis Cluster slot of a stored key, by Redis's own rule: CRC16 (XMODEM) modulo 16384 of
/// the hash tag (between the first `{` and the first `}` after it, if not empty), else of the
/// whole name.
pub(crate) fn slot_of(name: &str) -> u16 {
    let tag = name
        .split_once('{')
        .and_then(|(_, rest)| rest.split_once('}'))
        .map(|(tag, _)| tag)
        .filter(|tag| !tag.is_empty())
        .unwrap_or(name);
    crc16_slot(tag)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> KeyLayout {
        KeyLayout::new("tg".to_owned())
    }

    fn rule(id: &str) -> RuleId {
        RuleId::new(id).expect("valid rule id")
    }

    #[test]
    fn a_plain_key_reads_as_the_layout_says() {
        let stored = layout().key(StateFormat::Timestamp, &rule("login"), &Key::new("user77"));
        assert_eq!(stored, "tg:t2:{login:%06user77}");
    }

    #[test]
    fn the_slot_is_the_crc16_of_the_hash_tag() {
        // Redis Cluster's specification example: CRC16 of "123456789" is 0x31C3 (< 16384).
        assert_eq!(slot_of("123456789"), 0x31c3);
        let stored = layout().key(StateFormat::Log, &rule("login"), &Key::new("user77"));
        assert_eq!(slot_of(&stored), slot_of("login:%06user77"));
    }

    #[test]
    fn every_format_of_one_rule_and_key_shares_a_slot_but_not_a_name() {
        let keys: Vec<String> = StateFormat::ALL
            .iter()
            .map(|format| layout().key(*format, &rule("r"), &Key::new("k")))
            .collect();
        assert!(keys.iter().all(|key| slot_of(key) == slot_of(&keys[0])));
        for (i, a) in keys.iter().enumerate() {
            for b in &keys[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn a_refund_marker_shares_the_state_s_hash_tag_and_names_the_receipt() {
        let (rule, key) = (rule("login"), Key::new("user77"));
        let marker = layout().marker(&rule, &key, 0xc0ffee);
        assert_eq!(marker, "tg:r1:{login:%06user77}:0000000000c0ffee");
        let state = layout().key(StateFormat::Log, &rule, &key);
        assert_eq!(slot_of(&marker), slot_of(&state));
        assert_ne!(marker, layout().marker(&rule, &key, 0xc0ffef));
    }

    #[test]
    fn sub_buckets_of_one_key_land_in_their_own_part_of_the_slots() {
        let rule = rule("trending");
        for key in [
            Key::new("hot-topic"),
            Key::new("x".repeat(500)),
            Key::global(),
        ] {
            for of in [2_u32, 3, 6, 16] {
                let slots: Vec<u16> = (0..of)
                    .map(|index| {
                        let stored =
                            layout().key(StateFormat::Timestamp, &rule.sub_bucket(index, of), &key);
                        assert_eq!(stored.matches('{').count(), 1, "{stored}");
                        slot_of(&stored)
                    })
                    .collect();
                for (index, slot) in slots.iter().enumerate() {
                    let part = u64::from(*slot) * u64::from(of) / 16_384;
                    assert_eq!(part, index as u64, "{of} parts: {slots:?}");
                }
            }
        }
        let whole = layout().key(StateFormat::Timestamp, &rule, &Key::new("hot-topic"));
        assert_eq!(
            whole, "tg:t2:{trending:%09hot-topic}",
            "a rule's own keys are never salted"
        );
    }

    #[test]
    fn braces_and_percent_signs_in_a_key_are_escaped() {
        let stored = layout().key(StateFormat::Timestamp, &rule("r"), &Key::new("}{x}%"));
        assert_eq!(stored, "tg:t2:{r:%05%7D%7Bx%7D%25}");
        assert_eq!(stored.matches('{').count(), 1);
        assert_eq!(stored.matches('}').count(), 1);
    }

    #[test]
    fn long_keys_are_hashed_and_cannot_equal_short_ones() {
        let long = Key::new(vec![0u8; 100]);
        let stored = layout().key(StateFormat::Timestamp, &rule("r"), &long);
        assert!(stored.len() < 60, "{}", stored);
        assert!(stored.contains(":#"));
        let looks_alike = Key::new(&stored[stored.find('#').unwrap_or(0)..]);
        let other = layout().key(StateFormat::Timestamp, &rule("r"), &looks_alike);
        assert_ne!(other, stored);
    }

    #[test]
    fn prefixes_are_checked() {
        assert!(is_valid_prefix("tg"));
        assert!(is_valid_prefix("app:prod.v2"));
        assert!(!is_valid_prefix(""));
        assert!(!is_valid_prefix("a{b}"));
        assert!(!is_valid_prefix(&"x".repeat(65)));
    }
}
