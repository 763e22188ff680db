//! The whole store conformance suite against a real Redis Cluster (three masters, three
//! replicas), with "now" passed in from a manual clock so no case sleeps.

mod common;

tollgate_testing::conformance_suite!(block_on = common::block_on, store = common::cluster_store);

/// Not in the suite (a `FallbackStore` answers such an error by each rule's policy): run by
/// name, as every store that keeps the state does. Before, the script wrote the state with a
/// time it cannot read back, and the key answered `TOLLGATE_CORRUPT` from then on.
#[test]
fn a_time_past_the_supported_range_is_an_error_that_changes_nothing() {
    common::block_on(
        tollgate_testing::conformance::a_time_past_the_supported_range_is_an_error_that_changes_nothing(
            &common::cluster_store,
        ),
    );
}
