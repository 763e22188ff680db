//! The share of its limit at which a rule alerts.

use std::fmt;

/// Parts of a whole, as a share is kept: exact to a ten-thousandth of a percent.
pub(crate) const WHOLE: u64 = 1_000_000;

/// The share of its limit at which a rule alerts ([`Rule::with_alert_at`](crate::Rule::with_alert_at)):
/// above 0, at most 1 (the limit itself: the alert is raised by the first refusal). Kept in
/// millionths, so the request path compares whole numbers.
///
/// ```
/// use tollgate_tower::AlertShare;
///
/// let share = AlertShare::new(0.8)?;
/// assert_eq!(share.get(), 0.8);
/// assert_eq!(share.to_string(), "80 %");
/// assert_eq!(AlertShare::new(0.825)?.to_string(), "82.5 %");
/// assert!(AlertShare::new(0.0).is_err());
/// assert!(AlertShare::new(1.5).is_err());
/// assert!(AlertShare::new(f64::NAN).is_err());
/// # Ok::<(), tollgate_tower::AlertShareError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AlertShare {
    millionths: u32,
}

impl AlertShare {
    /// `share` of the limit, from above 0 to 1 (0.8 is 80 %), to the nearest millionth; an
    /// error otherwise (0, below, above 1, or not a number).
    pub fn new(share: f64) -> Result<AlertShare, AlertShareError> {
        if !(share > 0.0 && share <= 1.0) {
            return Err(AlertShareError { share });
        }
        // In (0, 1]: the product is in (0, 1e6], so the conversion is exact.
        let millionths = (share * WHOLE as f64).round().max(1.0) as u32;
        Ok(AlertShare { millionths })
    }

    /// The share, from above 0 to 1.
    pub fn get(self) -> f64 {
        f64::from(self.millionths) / WHOLE as f64
    }

    /// The share in millionths of the limit.
    pub(crate) fn millionths(self) -> u64 {
        u64::from(self.millionths)
    }

    /// The share of `millionths` of the limit (taken into 1 to a whole).
    pub(crate) fn from_millionths(millionths: u64) -> AlertShare {
        let millionths = millionths.clamp(1, WHOLE);
        AlertShare {
            millionths: u32::try_from(millionths).unwrap_or(u32::MAX),
        }
    }

    /// Whether `used` of `limit` reaches the share (never for a limit of 0).
    #[inline]
    pub(crate) fn reached_by(self, used: u64, limit: u64) -> bool {
        limit > 0
            && u128::from(used) * u128::from(WHOLE)
                >= u128::from(self.millionths()) * u128::from(limit)
    }
}

/// `millionths` of a whole as a percentage, to four decimals at most: "80 %", "82.5 %".
pub(crate) fn percent(millionths: u64) -> String {
    let (whole, rest) = (millionths / 10_000, millionths % 10_000);
    if rest == 0 {
        return format!("{whole} %");
    }
    let fraction = format!("{rest:04}");
    format!("{whole}.{} %", fraction.trim_end_matches('0'))
}

impl fmt::Display for AlertShare {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&percent(self.millionths()))
    }
}

/// A share that is not above 0 and at most 1 ([`AlertShare::new`]).
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error("an alert share is above 0 and at most 1 (0.8 is 80 %), not {share}")]
#[non_exhaustive]
pub struct AlertShareError {
    share: f64,
}

impl AlertShareError {
    /// The share given.
    pub fn share(&self) -> f64 {
        self.share
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_is_reached_at_its_part_of_the_limit_and_not_below() {
        let share = AlertShare::new(0.8).expect("valid");
        assert!(!share.reached_by(7, 10));
        assert!(share.reached_by(8, 10));
        assert!(share.reached_by(10, 10));
        assert!(!share.reached_by(0, 0));
        assert!(share.reached_by(u64::MAX, u64::MAX));
        let whole = AlertShare::new(1.0).expect("valid");
        assert!(!whole.reached_by(1_999, 2_000));
        assert!(whole.reached_by(2_000, 2_000));
        let tiny = AlertShare::new(1e-9).expect("rounds up to a millionth");
        assert_eq!(tiny.millionths(), 1);
    }

    #[test]
    fn percentages_read_easily() {
        assert_eq!(percent(800_000), "80 %");
        assert_eq!(percent(1_000_000), "100 %");
        assert_eq!(percent(825_000), "82.5 %");
        assert_eq!(percent(1), "0.0001 %");
    }
}
