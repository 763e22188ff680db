//! Whether a usage report can be answered: a domain (on a stream's first report; the same one,
//! or none, after), at least one bucket, and every bucket named by a non-empty id of keys Envoy's
//! configuration makes. A report that is not is refused whole, before anything is counted, with
//! `INVALID_ARGUMENT` saying why; the stream ends with it.
//!
//! The values of a bucket id are not checked here: Envoy builds them from requests (a header's
//! value), so one client's odd value must not end the stream every other bucket rides on. A
//! value past [`MAX_VALUE_BYTES`](crate::caps::MAX_VALUE_BYTES) is answered for its bucket alone
//! (see `target.rs`).

use envoy_types::pb::envoy::service::rate_limit_quota::v3::RateLimitQuotaUsageReports;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_usage_reports::BucketQuotaUsage;
use tonic::Status;

use crate::caps::{MAX_DESCRIPTOR_ENTRIES, MAX_DOMAIN_BYTES, MAX_KEY_BYTES, invalid};

/// The most buckets one report may carry (Envoy reports every bucket it holds in one message).
pub const MAX_BUCKETS_PER_REPORT: usize = 100_000;

/// `Ok` when `reports` can be answered on a stream whose domain is `domain` (`None` before its
/// first report); else `INVALID_ARGUMENT`.
pub(crate) fn check(
    reports: &RateLimitQuotaUsageReports,
    domain: Option<&str>,
) -> Result<(), Status> {
    match domain {
        None if reports.domain.is_empty() => {
            return Err(invalid(
                "the stream's first report names no domain (RateLimitQuotaUsageReports.domain)",
            ));
        }
        Some(domain) if !reports.domain.is_empty() && reports.domain != domain => {
            return Err(invalid(format!(
                "this stream's domain is {domain:?}, and a report names {:?}: open a new stream for another domain",
                reports.domain
            )));
        }
        _ => {}
    }
    if reports.domain.len() > MAX_DOMAIN_BYTES {
        return Err(invalid(format!(
            "the domain is {} bytes; at most {MAX_DOMAIN_BYTES}",
            reports.domain.len()
        )));
    }
    let buckets = reports.bucket_quota_usages.len();
    if buckets == 0 {
        return Err(invalid("the report has no bucket usages"));
    }
    if buckets > MAX_BUCKETS_PER_REPORT {
        return Err(invalid(format!(
            "the report has {buckets} bucket usages; at most {MAX_BUCKETS_PER_REPORT}"
        )));
    }
    for (at, usage) in reports.bucket_quota_usages.iter().enumerate() {
        check_bucket(at, usage)?;
    }
    Ok(())
}

fn check_bucket(at: usize, usage: &BucketQuotaUsage) -> Result<(), Status> {
    let entries = usage.bucket_id.as_ref().map_or(0, |id| id.bucket.len());
    if entries == 0 {
        return Err(invalid(format!(
            "bucket usage {at} has no bucket id, or an empty one: an assignment could not name its bucket"
        )));
    }
    if entries > MAX_DESCRIPTOR_ENTRIES {
        return Err(invalid(format!(
            "bucket usage {at}'s id has {entries} entries; at most {MAX_DESCRIPTOR_ENTRIES}"
        )));
    }
    let keys = usage.bucket_id.iter().flat_map(|id| id.bucket.keys());
    for key in keys {
        if key.is_empty() {
            return Err(invalid(format!("bucket usage {at}'s id has an empty key")));
        }
        if key.len() > MAX_KEY_BYTES {
            return Err(invalid(format!(
                "bucket usage {at}'s id has a key of {} bytes; at most {MAX_KEY_BYTES}",
                key.len()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::service::rate_limit_quota::v3::BucketId;

    fn report(domain: &str, ids: &[&[(&str, &str)]]) -> RateLimitQuotaUsageReports {
        RateLimitQuotaUsageReports {
            domain: domain.to_owned(),
            bucket_quota_usages: ids
                .iter()
                .map(|pairs| BucketQuotaUsage {
                    bucket_id: Some(BucketId {
                        bucket: pairs
                            .iter()
                            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
                            .collect(),
                    }),
                    ..BucketQuotaUsage::default()
                })
                .collect(),
        }
    }

    fn message(result: Result<(), Status>) -> String {
        result
            .err()
            .map(|status| status.message().to_owned())
            .unwrap_or_default()
    }

    #[test]
    fn the_first_report_names_the_domain_and_later_ones_keep_it() {
        let one = [&[("name", "edge")][..]];
        assert!(check(&report("edge", &one), None).is_ok());
        assert!(message(check(&report("", &one), None)).contains("names no domain"));
        assert!(check(&report("", &one), Some("edge")).is_ok());
        assert!(message(check(&report("other", &one), Some("edge"))).contains("open a new stream"));
    }

    #[test]
    fn a_report_without_buckets_or_with_an_empty_bucket_id_is_refused() {
        assert!(message(check(&report("edge", &[]), None)).contains("no bucket usages"));
        assert!(
            message(check(&report("edge", &[&[]]), None)).contains("no bucket id, or an empty one")
        );
        let missing = RateLimitQuotaUsageReports {
            domain: "edge".into(),
            bucket_quota_usages: vec![BucketQuotaUsage::default()],
        };
        assert!(message(check(&missing, None)).contains("bucket usage 0"));
        assert!(message(check(&report("edge", &[&[("", "x")]]), None)).contains("empty key"));
        // A value is a request's to make: checked per bucket, not here.
        let long = "v".repeat(10_000);
        assert!(check(&report("edge", &[&[("user", long.as_str())]]), None).is_ok());
    }
}
