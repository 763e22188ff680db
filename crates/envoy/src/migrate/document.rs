//! The file's top level: `domain` and `descriptors`.

use super::config::Config;
use super::descriptor::descriptors;
use super::error::{At, Report};
use super::fields::{TOP, fields};
use super::values::text;
use super::yaml::{Node, Shape, at, shape};

/// The configuration in `document` (`None`: the file has none), unless its top level is not a
/// mapping (reported).
pub(crate) fn config(document: Option<&Node<'_>>, report: &mut Report<'_>) -> Option<Config> {
    let empty = "the file is empty: a ratelimit configuration has a `domain` and its `descriptors`";
    let Some(document) = document else {
        report.at(At::START, empty);
        return None;
    };
    if matches!(shape(document), Shape::Absent) {
        report.at(at(document), empty);
        return None;
    }
    let fields = fields(document, &TOP, report)?;
    let domain = match fields.get("domain") {
        None => {
            report.at(
                fields.at(),
                "the file has no `domain`: ratelimit needs one, and each rule names it for \
                 Envoy; add `domain: <the domain Envoy sends>`",
            );
            String::new()
        }
        Some(node) => match text(node, "domain", report) {
            Some("") => {
                report.at(at(node), "`domain` is empty: give the domain Envoy sends");
                String::new()
            }
            domain => domain.unwrap_or_default().to_owned(),
        },
    };
    let descriptors = fields
        .get("descriptors")
        .map(|node| descriptors(node, 0, report))
        .unwrap_or_default();
    Some(Config {
        at: fields.at(),
        domain,
        descriptors,
    })
}
