//! What a request may hold: caps on its size, each stated, and the check that turns a request
//! outside them into `INVALID_ARGUMENT` before anything is counted.

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use tonic::Status;

pub use tollgate_config::MAX_DESCRIPTOR_ENTRIES;

/// The most descriptors one request may carry (Envoy sends one per matching rate limit action
/// of the route; a route with more than a few is unusual).
pub const MAX_DESCRIPTORS: usize = 64;

/// The longest domain, in bytes.
pub const MAX_DOMAIN_BYTES: usize = 256;

/// The longest descriptor entry key, in bytes.
pub const MAX_KEY_BYTES: usize = 256;

/// The longest descriptor entry value, in bytes (a path or a header value; a stored key longer
/// than 128 bytes is kept as its digest, so a long value costs no memory in the store).
pub const MAX_VALUE_BYTES: usize = 4096;

/// The largest request message the service reads, in bytes: room for a request at every cap
/// above at once (64 descriptors of 16 entries of 256-byte keys and 4,096-byte values, about
/// 4.5 MB with their framing), past tonic's default of 4 MiB. A larger message is refused by
/// the transport (`OUT_OF_RANGE`) before it is read.
pub const MAX_REQUEST_BYTES: usize = 5 * 1024 * 1024;

/// `Ok` when `request` is within the caps and well formed; else `INVALID_ARGUMENT` saying what
/// is wrong (nothing has been counted).
pub(crate) fn check(request: &RateLimitRequest) -> Result<(), Status> {
    if request.domain.is_empty() {
        return Err(invalid("the request names no domain"));
    }
    if request.domain.len() > MAX_DOMAIN_BYTES {
        return Err(invalid(format!(
            "the domain is {} bytes; at most {MAX_DOMAIN_BYTES}",
            request.domain.len()
        )));
    }
    if request.descriptors.is_empty() {
        return Err(invalid("the request has no descriptors"));
    }
    if request.descriptors.len() > MAX_DESCRIPTORS {
        return Err(invalid(format!(
            "the request has {} descriptors; at most {MAX_DESCRIPTORS}",
            request.descriptors.len()
        )));
    }
    for (at, descriptor) in request.descriptors.iter().enumerate() {
        check_descriptor(at, descriptor)?;
    }
    Ok(())
}

fn check_descriptor(at: usize, descriptor: &RateLimitDescriptor) -> Result<(), Status> {
    let entries = descriptor.entries.len();
    if entries == 0 {
        return Err(invalid(format!("descriptor {at} has no entries")));
    }
    if entries > MAX_DESCRIPTOR_ENTRIES {
        return Err(invalid(format!(
            "descriptor {at} has {entries} entries; at most {MAX_DESCRIPTOR_ENTRIES}"
        )));
    }
    if descriptor.is_negative_hits {
        return Err(invalid(format!(
            "descriptor {at} asks for negative hits (giving budget back), which this service does not do"
        )));
    }
    for entry in &descriptor.entries {
        if entry.key.is_empty() {
            return Err(invalid(format!(
                "descriptor {at} has an entry with an empty key"
            )));
        }
        if entry.key.len() > MAX_KEY_BYTES {
            return Err(invalid(format!(
                "descriptor {at} has a key of {} bytes; at most {MAX_KEY_BYTES}",
                entry.key.len()
            )));
        }
        if entry.value.len() > MAX_VALUE_BYTES {
            return Err(invalid(format!(
                "descriptor {at}'s entry {:?} has a value of {} bytes; at most {MAX_VALUE_BYTES}",
                entry.key,
                entry.value.len()
            )));
        }
    }
    Ok(())
}

/// `INVALID_ARGUMENT` with `message`.
pub(crate) fn invalid(message: impl Into<String>) -> Status {
    Status::invalid_argument(message.into())
}
