//! Reading RFC 8941 lists, as the `RateLimit` and `RateLimit-Policy` fields are.

use http::HeaderValue;
use sfv::{ListEntry, Parser, Version};

/// One member of an RFC 8941 list of strings with integer parameters, as the `RateLimit` and
/// `RateLimit-Policy` fields are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SfMember {
    /// The policy name.
    pub(crate) name: String,
    /// The parameters, in order.
    pub(crate) params: Vec<(String, i64)>,
}

impl SfMember {
    /// The parameter `key`; panics naming the member when it is missing.
    pub(crate) fn param(&self, key: &str) -> i64 {
        self.params
            .iter()
            .find(|(name, _)| name == key)
            .map(|(_, value)| *value)
            .unwrap_or_else(|| panic!("no `{key}` parameter in {self:?}"))
    }
}

/// Parses `field: value` with a real, strict RFC 8941 parser; panics if it is not a list of
/// sf-strings with integer parameters.
pub(crate) fn sf_members(field: &str, value: &HeaderValue) -> Vec<SfMember> {
    let list: sfv::List = Parser::new(value.as_bytes())
        .with_version(Version::Rfc8941)
        .parse()
        .unwrap_or_else(|error| panic!("`{field}: {value:?}` is not an sf-list: {error}"));
    list.into_iter()
        .map(|entry| {
            let ListEntry::Item(item) = entry else {
                panic!("an inner list in `{field}: {value:?}`");
            };
            let name = item.bare_item.as_string().expect("a policy name string");
            let params = item
                .params
                .iter()
                .map(|(key, bare)| {
                    let number = bare.as_integer().expect("an integer parameter");
                    (key.as_str().to_owned(), i64::from(number))
                })
                .collect();
            SfMember {
                name: name.as_str().to_owned(),
                params,
            }
        })
        .collect()
}
