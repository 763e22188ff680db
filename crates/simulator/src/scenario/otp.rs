//! (f) One-time-code fraud in normal times: a pumping attack among real people asking for
//! codes, and the SMS bill each policy runs up.

use crate::random::Random;
use crate::timeline::Source;

use super::pumping::{OtpAttack, Targets};
use super::real_codes::RealCodes;

/// The code-fraud scenario's parameters: an [`OtpAttack`] (an hour of 10 codes a second to
/// 2,000 numbers in 20 ranges, by default) among [`RealCodes`], and what one code costs.
#[derive(Debug, Clone, PartialEq)]
pub struct OtpFraud {
    /// The attack; the scenario lasts as long.
    pub attack: OtpAttack,
    /// Real people asking for codes meanwhile.
    pub codes: RealCodes,
    /// What sending one code costs (for the bill), in dollars.
    pub sms_price: f64,
}

impl Default for OtpFraud {
    fn default() -> Self {
        OtpFraud {
            attack: OtpAttack::default(),
            codes: RealCodes::default(),
            sms_price: DEFAULT_SMS_PRICE,
        }
    }
}

/// What one code costs by default, in dollars: an SMS to a far-off mobile network.
pub(crate) const DEFAULT_SMS_PRICE: f64 = 0.05;

/// The stream the attack's targets are drawn from: apart from the traffic's, so the same seed
/// aims the same attack whatever else the scenario holds.
pub(crate) const TARGETS_STREAM: u64 = 0x6f74_705f_7461_7267;

impl OtpFraud {
    pub(crate) fn duration(&self) -> u64 {
        self.attack.duration()
    }

    pub(crate) fn parameters(&self) -> Vec<(&'static str, String)> {
        let mut parameters = self.attack.parameters();
        parameters.push(("real codes", self.codes.to_string()));
        parameters.push(("SMS price", format!("${}", self.sms_price)));
        parameters
    }

    pub(crate) fn sources(&self, seed: u64) -> Vec<Box<dyn Source>> {
        let end = self.duration();
        let targets = Targets::draw(&self.attack, &mut Random::new(seed ^ TARGETS_STREAM));
        vec![
            self.attack.source(&targets, end),
            self.codes.source(&targets, end),
        ]
    }
}
