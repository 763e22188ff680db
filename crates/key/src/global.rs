//! One count for everyone.

use http::request::Parts;

use super::{KeyBuilder, KeyExtractor, KeyValueError};

/// Everyone together: a global cap ("never more than 2,000 OTPs a second in total").
///
/// ```
/// use tollgate_key::Global;
/// let everyone = Global;
/// # let _ = everyone;
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Global;

impl KeyExtractor for Global {
    fn extract(&self, _request: &Parts, _key: &mut KeyBuilder) -> bool {
        true
    }

    fn key_from_values(
        &self,
        _values: &mut dyn Iterator<Item = &str>,
        _key: &mut KeyBuilder,
    ) -> Result<(), KeyValueError> {
        Ok(())
    }
}
