//! A ratelimit `unit` and the fixed window it becomes.

/// The units ratelimit knows, in its order of size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Year,
}

/// The units' names, for messages and suggestions.
pub(crate) const NAMES: &[&str] = &["second", "minute", "hour", "day", "week", "month", "year"];

impl Unit {
    /// The unit named `name`, in any case (ratelimit upper-cases it).
    pub(crate) fn parse(name: &str) -> Option<Unit> {
        let unit = match name.to_ascii_lowercase().as_str() {
            "second" => Unit::Second,
            "minute" => Unit::Minute,
            "hour" => Unit::Hour,
            "day" => Unit::Day,
            "week" => Unit::Week,
            "month" => Unit::Month,
            "year" => Unit::Year,
            _ => return None,
        };
        Some(unit)
    }

    /// The window, as a rule file writes it. ratelimit counts a month as 30 days and a year as
    /// 365, aligned to the Unix epoch like a fixed window.
    pub(crate) fn window(self) -> &'static str {
        match self {
            Unit::Second => "1s",
            Unit::Minute => "1m",
            Unit::Hour => "1h",
            Unit::Day => "1d",
            Unit::Week => "7d",
            Unit::Month => "30d",
            Unit::Year => "365d",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_in_any_case_to_its_window() {
        let windows: Vec<&str> = NAMES
            .iter()
            .filter_map(|name| Unit::parse(&name.to_ascii_uppercase()))
            .map(Unit::window)
            .collect();
        assert_eq!(windows, ["1s", "1m", "1h", "1d", "7d", "30d", "365d"]);
        assert_eq!(Unit::parse("Minute"), Some(Unit::Minute));
        assert_eq!(Unit::parse("unknown"), None);
        assert_eq!(Unit::parse("minutes"), None);
    }
}
