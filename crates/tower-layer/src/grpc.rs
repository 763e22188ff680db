//! Charging a gRPC call per inbound message (feature `grpc`,
//! [`Rule::per_message`](crate::Rule::per_message)): the request body is wrapped (messages.rs)
//! and read for its messages' 5-byte prefixes however the data frames cut the stream
//! (framing.rs). What a gRPC caller is answered is in `headers/grpc.rs`.

mod framing;
pub(crate) mod messages;
