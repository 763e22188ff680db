//! Phone numbers as the SMS limits key them: the number itself (E.164, one key however it is
//! written) and its range (where premium-rate numbers cluster).
//!
//! Parsing and validation are `phonenumber`'s (a port of Google's libphonenumber, with its
//! metadata): which lengths and leading digits each country assigns is data that changes
//! every few months, not something to hand-write. A number that cannot be assigned is refused
//! before any code is sent or counted.

use phonenumber::Mode;

/// How many trailing digits a range leaves open: a range is a block of 10,000 consecutive
/// numbers, the unit in which carriers are assigned numbers and premium-rate numbers are
/// leased out.
const RANGE_OPEN_DIGITS: usize = 4;

/// A phone number that can be assigned, in international form.
///
/// ```
/// let one = chirp::Phone::parse("+44 7911 123456").expect("a UK mobile");
/// let same = chirp::Phone::parse("+44-(0)7911-123-456").expect("the same, written otherwise");
/// assert_eq!(one, same);
/// assert_eq!(one.e164(), "+447911123456");
/// assert_eq!(one.range(), "+44791112");
/// assert!(chirp::Phone::parse("07911 123456").is_none(), "no country code");
/// assert!(chirp::Phone::parse("+44 7700 900123").is_none(), "a range kept for drama, never assigned");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Phone {
    e164: String,
    country: u16,
    range: String,
}

impl Phone {
    /// Parses a number written in international form (`+` and the country code; spaces,
    /// dashes, dots, brackets and a national `(0)` allowed), if it is one a carrier can assign.
    pub fn parse(written: &str) -> Option<Phone> {
        // libphonenumber reads far more than a phone number (letters as on a keypad, "ext."):
        // keep the input to what a number field holds, and short.
        let plausible = written.len() <= 32
            && written.trim_start().starts_with('+')
            && written
                .chars()
                .all(|c| c.is_ascii_digit() || " +-().".contains(c));
        if !plausible {
            return None;
        }
        let number = phonenumber::parse(None, written).ok()?;
        if !phonenumber::is_valid(&number) {
            return None;
        }
        let e164 = number.format().mode(Mode::E164).to_string();
        let national = number.national().to_string();
        let country = number.country().code();
        let kept = national.len().checked_sub(RANGE_OPEN_DIGITS)?;
        let range = format!("+{country}{}", &national[..kept]);
        Some(Phone {
            e164,
            country,
            range,
        })
    }

    /// The number in E.164 (`+447911123456`): the key of the per-number limit.
    pub fn e164(&self) -> &str {
        &self.e164
    }

    /// Its country calling code (`44`).
    pub fn country(&self) -> u16 {
        self.country
    }

    /// Its range: the country code and the leading digits of the national number, all but
    /// the last four (`+44791112`): the key of the per-range limit.
    pub fn range(&self) -> &str {
        &self.range
    }
}

#[cfg(test)]
mod tests {
    use super::Phone;

    #[test]
    fn one_number_however_it_is_written_and_nothing_that_is_not_one() {
        let key = |written: &str| Phone::parse(written).map(|phone| phone.e164().to_owned());
        for written in [
            "+12125550123",
            "+1 212 555 0123",
            "+1 (212) 555-0123",
            "+1.212.555.0123",
        ] {
            assert_eq!(key(written).as_deref(), Some("+12125550123"), "{written}");
        }
        for hostile in [
            "",
            "+",
            "12125550123",
            "+1 212 555 0123 ext. 5",
            "+1 CALL NOW",
            "+1 212 555 0123\u{0}",
            "+15550199",
            &"9".repeat(40),
            &format!("+1{}", "2".repeat(60)),
        ] {
            assert_eq!(key(hostile), None, "{hostile:?}");
        }
    }

    #[test]
    fn a_range_is_the_number_but_its_last_four_digits() {
        let phone = Phone::parse("+373 69 123 456").expect("a Moldovan mobile");
        assert_eq!(phone.country(), 373);
        assert_eq!(phone.range(), "+3736912");
        let neighbour = Phone::parse("+373 69 129 999").expect("a Moldovan mobile");
        assert_eq!(neighbour.range(), phone.range());
        let next = Phone::parse("+373 69 130 000").expect("a Moldovan mobile");
        assert_ne!(next.range(), phone.range());
    }
}
