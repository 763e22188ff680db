//! Helpers shared by the integration tests of tollgate-tower and tollgate-axum (the axum crate
//! includes this module by path). Each test binary uses only some of them.
#![allow(dead_code, unused_imports)]

pub(crate) mod events;
pub(crate) mod server;
mod sf;

pub(crate) use sf::{SfMember, sf_members};
