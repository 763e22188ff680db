//! One count for everyone.

use http::request::Parts;

use super::{KeyBuilder, KeyExtractor};

/// Everyone together: a global cap ("never more than 2,000 OTPs a second in total").
///
/// ```
/// use tollgate_tower::key::Global;
/// let everyone = Global;
/// # let _ = everyone;
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Global;

impl KeyExtractor for Global {
    fn extract(&self, _request: &Parts, _key: &mut KeyBuilder) -> bool {
        true
    }
}
