//! Taking a cost "up to" what there is, "as debt" past the limit, or exactly "after debt"
//! ([`Take`]), over any
//! algorithm's state: the steps every store runs (the Redis store runs the same in Lua).
//!
//! Both are built from the algorithm's own check, so they mean the same for every algorithm:
//!
//! * **up to `n`**: read what remains (a check of cost 0), then charge `min(n, remaining)`;
//!   refused only when not one unit remains, with the wait until one does.
//! * **as debt `n`**: charge what fits (up to `n`), and owe the rest. What is owed is paid
//!   first, from whatever allowance comes back, by the next up-to, debt or after-debt item of
//!   that caller; until it is paid, up-to and after-debt items are refused and debt items see
//!   nothing remaining.
//! * **after debt `n`**: pay what is owed, then check `n` exactly (all or nothing).
//!
//! A debt lapses once the caller's allowance could have come back whole and paid it (see
//! [`debt_lapses_at`]): nobody spent that allowance in the meantime, so dropping the debt then
//! grants nothing that the exact limiter would not have. A debt is capped at 1,024 full
//! allowances ([`debt_cap`]).

use super::{AlgorithmState, allowed, limit_reached};
use crate::{Charge, Decision, Quota, Take, Timestamp};

/// What an up-to or debt item did: its decision, its charge (up-to items only: a debt item's
/// charge has no receipt), and the units owed after it.
pub(crate) type Taken = (Decision, Option<Charge>, u64);

/// Evaluates an up-to or debt item of `cost` at `now` on `state`, whose caller owed `owed`
/// units; an exact item is checked as usual.
pub(crate) fn take<S: AlgorithmState>(
    state: &mut S,
    quota: &Quota,
    now: Timestamp,
    take: Take,
    cost: u64,
    owed: u64,
) -> Taken {
    let mut owed = owed;
    if take != Take::Exact && owed > 0 {
        let (_, _, paid) = up_to(state, quota, now, owed);
        owed -= paid;
    }
    match take {
        Take::UpTo | Take::AfterDebt if owed > 0 => {
            // Nothing is left after paying (else the debt would be paid): wait until the debt
            // and one unit (an estimate: its cost) fit. A debt beyond the limit takes longer
            // than this says; the caller is refused again then, with the rest of the wait.
            let wanted = if take == Take::UpTo { 1 } else { cost.max(1) };
            let waiting = state.peek(quota, now, owed.saturating_add(wanted).min(quota.limit()));
            let refused = limit_reached(
                quota.limit(),
                0,
                micros(waiting.reset_after()),
                micros(waiting.retry_after()),
            );
            (refused, None, owed)
        }
        Take::UpTo => {
            let (decision, charge, _) = up_to(state, quota, now, cost);
            (decision, charge, 0)
        }
        Take::AsDebt => {
            let (decision, _, got) = up_to(state, quota, now, cost);
            owed = owed.saturating_add(cost - got).min(debt_cap(quota));
            let remaining = if owed > 0 { 0 } else { decision.remaining() };
            let reported = allowed(quota.limit(), remaining, micros(decision.reset_after()));
            (reported, None, owed)
        }
        _ => {
            let (decision, charge) = state.check(quota, now, cost, now);
            (decision, charge, owed)
        }
    }
}

/// Charges as much of `want` as remains, and says how much that was. With nothing remaining,
/// the answer is the refusal of one unit (when it will fit).
fn up_to<S: AlgorithmState>(state: &mut S, quota: &Quota, now: Timestamp, want: u64) -> Taken {
    let (current, _) = state.check(quota, now, 0, now);
    if want == 0 {
        return (current, None, 0);
    }
    let mut grant = want.min(current.remaining());
    while grant > 0 {
        let (decision, charge) = state.check(quota, now, grant, now);
        if decision.is_allowed() {
            return (decision, charge, grant);
        }
        // An estimate (the sliding counter's) that promised more than fits: try what the
        // refusal says remains.
        grant = (grant - 1).min(decision.remaining());
    }
    let (decision, charge) = state.check(quota, now, 1, now);
    let got = u64::from(charge.is_some());
    (decision, charge, got)
}

/// When `owed` units of debt lapse for a caller whose state is `state` at `now`: once the state
/// is whole again ([`AlgorithmState::idle_at`]), plus one replenish time per full limit owed.
pub(crate) fn debt_lapses_at<S: AlgorithmState>(
    state: &S,
    quota: &Quota,
    now: Timestamp,
    owed: u64,
) -> Timestamp {
    let whole = state.idle_at(quota).max(now);
    let periods = owed.div_ceil(quota.limit().max(1));
    let paying = periods.saturating_mul(micros(quota.replenish_time()));
    whole.saturating_add_micros(paying.min(MAX_PAYING_MICROS))
}

/// The most a caller can owe: 1,024 full allowances. A debt beyond it is forgiven (the answer
/// reports the capped debt): spend that large is a caller's mistake or an attack, and a debt
/// that takes longer than this to pay would lock a key for good.
pub(crate) fn debt_cap(quota: &Quota) -> u64 {
    quota.limit().saturating_mul(1_024)
}

/// How long a debt may take to lapse at most: 2^52 µs (Lua's doubles stay exact).
const MAX_PAYING_MICROS: u64 = 1 << 52;

fn micros(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}
