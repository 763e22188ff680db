//! Where simulated phone numbers are: real people's numbers spread over their countries'
//! mobile ranges, and a fraudster's premium-rate numbers packed into a few ranges of the
//! destinations SMS pumping favours. Every number drawn is one Chirp accepts (valid in
//! libphonenumber's metadata, checked through [`chirp::Phone`]).

use crate::random::Random;

/// A country's mobile numbers: its calling code, the national number's length, and leading
/// digits its carriers assign.
pub(crate) struct Country {
    pub(crate) code: u16,
    length: u32,
    leading: &'static [&'static str],
}

/// Where real users mostly are: the United Kingdom, France, Germany, the United States.
pub(crate) const HOME: [Country; 4] = [
    Country {
        code: 44,
        length: 10,
        leading: &["74", "75", "77", "78", "79"],
    },
    Country {
        code: 33,
        length: 9,
        leading: &["6", "7"],
    },
    Country {
        code: 49,
        length: 11,
        leading: &[
            "151", "152", "157", "160", "162", "170", "171", "172", "173", "176",
        ],
    },
    Country {
        code: 1,
        length: 10,
        leading: &["212", "415", "646", "312", "617", "206"],
    },
];

/// Destinations a pumping attack favours (far-off mobile networks with high termination
/// fees): Moldova, Iraq, Bangladesh, Latvia, Uzbekistan.
pub(crate) const PREMIUM: [Country; 5] = [
    Country {
        code: 373,
        length: 8,
        leading: &["60", "62", "67", "68", "69", "78", "79"],
    },
    Country {
        code: 964,
        length: 10,
        leading: &["75", "77", "78", "79"],
    },
    Country {
        code: 880,
        length: 10,
        leading: &["13", "14", "15", "16", "17", "18", "19"],
    },
    Country {
        code: 371,
        length: 8,
        leading: &["2"],
    },
    Country {
        code: 998,
        length: 9,
        leading: &["90", "91", "93", "94", "97", "99"],
    },
];

/// Numbers a range holds: all but the last four digits fixed (as [`chirp::Phone::range`]).
pub(crate) const RANGE_SIZE: u64 = 10_000;

/// A range of numbers: its first number (digits, E.164 without the `+`), the next
/// [`RANGE_SIZE`] - 1 following it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Range {
    pub(crate) first: u64,
}

impl Range {
    /// Number `index` of the range (`index` below [`RANGE_SIZE`]).
    pub(crate) fn number(self, index: u64) -> u64 {
        self.first + index % RANGE_SIZE
    }
}

impl Country {
    /// A random number of this country that Chirp accepts.
    pub(crate) fn number(&self, random: &mut Random) -> u64 {
        let range = self.range(random);
        range.number(random.below(RANGE_SIZE))
    }

    /// A random range of this country whose numbers Chirp accepts (drawn again until one is:
    /// validity depends on the leading digits, not the last four).
    pub(crate) fn range(&self, random: &mut Random) -> Range {
        let mut last = None;
        for _ in 0..64 {
            let leading = self.leading[random.below(self.leading.len() as u64) as usize];
            let mut national: u64 = leading.parse().unwrap_or(0);
            for _ in leading.len() as u32..self.length - 4 {
                national = national * 10 + random.below(10);
            }
            let first = (u64::from(self.code) * 10u64.pow(self.length) + national * RANGE_SIZE)
                .min(999_999_999_999_990_000);
            let range = Range { first };
            if accepted(range.number(0)) && accepted(range.number(RANGE_SIZE - 1)) {
                return range;
            }
            last = Some(range);
        }
        // Every table above yields accepted ranges nearly always (the tests check it).
        last.unwrap_or(Range { first: 0 })
    }
}

/// Whether Chirp accepts the number `digits` (E.164 without its `+`).
pub(crate) fn accepted(digits: u64) -> bool {
    chirp::Phone::parse(&format!("+{digits}")).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_country_yields_numbers_chirp_accepts_and_a_range_is_chirps_range() {
        let mut random = Random::new(7);
        for country in HOME.iter().chain(&PREMIUM) {
            for _ in 0..50 {
                let range = country.range(&mut random);
                let (first, last) = (range.number(0), range.number(RANGE_SIZE - 1));
                let phone = |digits: u64| chirp::Phone::parse(&format!("+{digits}"));
                let (first, last) = (phone(first), phone(last));
                let (Some(first), Some(last)) = (first, last) else {
                    panic!("+{}: a range Chirp refuses: {range:?}", country.code);
                };
                assert_eq!(first.range(), last.range(), "one range for Chirp");
                assert_eq!(first.country(), country.code);
            }
        }
    }
}
