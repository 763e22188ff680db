//! The in-memory store's check path for a key it already holds neither boxes nor allocates.
//!
//! This test binary counts the test thread's allocations with a wrapping global allocator.

use std::time::Duration;

use futures_util::FutureExt;
use tollgate_core::{Item, Key, MemoryStore, Mode, Quota, Rate, RuleId, Store};
use tollgate_testing::CountingAllocator;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator::new();

#[test]
fn checks_on_known_keys_do_not_allocate() {
    // Up to three rules per request are answered inline, without the heap.
    let store = MemoryStore::new();
    let (reads, posting, pacing) = (
        RuleId::new("reads").unwrap(),
        RuleId::new("posting").unwrap(),
        RuleId::new("pacing").unwrap(),
    );
    let key = Key::new("account-4821");
    let long_key = Key::new("a key longer than fifteen bytes, stored boxed");
    let window = Duration::from_secs(60);
    let items = [
        Item::new(
            &reads,
            Quota::token_bucket(1_000_000, Rate::per_second(1_000)).unwrap(),
            &key,
        ),
        Item::new(
            &posting,
            Quota::sliding_window_counter(1_000_000, window).unwrap(),
            &long_key,
        ),
        Item::new(&posting, Quota::fixed_window(10, window).unwrap(), &key).with_mode(Mode::Shadow),
    ];
    let paced = Item::new(
        &pacing,
        Quota::leaky_bucket(Rate::per_second(1_000), window).unwrap(),
        &key,
    );
    // The first checks store the keys (and refuse once the shadow rule runs dry).
    for _ in 0..20 {
        store.check(&items).now_or_never().unwrap().unwrap();
        store.check_one(&paced).now_or_never().unwrap().unwrap();
    }
    let before = ALLOCATOR.allocations_on_this_thread();
    let mut allowed = 0;
    for _ in 0..1_000 {
        let answer = store.check(&items).now_or_never().unwrap().unwrap();
        allowed += usize::from(answer.is_allowed());
        let single = store
            .check(std::slice::from_ref(&items[0]))
            .now_or_never()
            .unwrap()
            .unwrap();
        allowed += usize::from(single.is_allowed());
        let one = store.check_one(&paced).now_or_never().unwrap().unwrap();
        allowed += usize::from(one.decision().is_allowed());
    }
    let allocations = ALLOCATOR.allocations_on_this_thread() - before;
    assert_eq!(allowed, 3_000);
    assert_eq!(
        allocations, 0,
        "the check path allocated {allocations} times"
    );
}
