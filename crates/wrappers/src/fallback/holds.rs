//! Concurrency holds taken in a fallback's local memory while its primary was down, told apart
//! from the primary's by their id, so each is given back (and renewed) where it was taken: a
//! local hold given to the primary would stay held in memory for ever, and a primary's given to
//! memory would free a slot some other request holds there.

use tollgate_core::Charge;

/// The id bit of a hold taken in local memory (remote stores' ids stay below 2^53).
const LOCAL: u64 = 1 << 63;

/// `charge`, marked as taken in local memory when it is a hold.
pub(super) fn mark_local(charge: Charge) -> Charge {
    match charge {
        Charge::Held { id, slots, .. } => tollgate_core::store_kit::held(id | LOCAL, slots),
        other => other,
    }
}

/// Where a receipt's charge is given back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HoldPlace {
    /// Not a hold: the primary, and local memory if the primary fails.
    NotAHold,
    /// A hold taken in local memory: there only.
    Local,
    /// A hold taken by the primary: there only (if the primary cannot be told, the hold
    /// lapses after its quota's slot ttl).
    Primary,
}

/// Where `charge` is given back.
pub(super) fn place_of(charge: &Charge) -> HoldPlace {
    match charge {
        Charge::Held { id, .. } if id & LOCAL != 0 => HoldPlace::Local,
        Charge::Held { .. } => HoldPlace::Primary,
        _ => HoldPlace::NotAHold,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marked_hold_is_local_and_other_charges_are_unchanged() {
        assert_eq!(
            place_of(&mark_local(tollgate_core::store_kit::held(0, 2))),
            HoldPlace::Local
        );
        assert_eq!(
            place_of(&tollgate_core::store_kit::held(12345, 1)),
            HoldPlace::Primary
        );
        let window = tollgate_core::store_kit::window(tollgate_core::Timestamp::from_secs(60), 3);
        assert_eq!(mark_local(window), window);
        assert_eq!(place_of(&window), HoldPlace::NotAHold);
    }
}
