//! The whole store conformance suite against a real redis-server, with "now" passed in from a
//! manual clock so no case sleeps.

mod common;

tollgate_testing::conformance_suite!(
    block_on = common::block_on,
    store = common::standalone_store
);
