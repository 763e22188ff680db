//! The Lua script every operation runs, its arguments and its answers.
//!
//! One script serves check, enforce, peek, refund and start, so one SHA is loaded once per server (the
//! connection sends `EVALSHA` and, on `NOSCRIPT`, loads the script and sends it again). Its parts live in
//! `src/lua/`: `prelude.lua` (exact integer arithmetic and the one place "now" comes from),
//! `state.lua` (reading and writing one key's state, with expiry), `algorithms.lua` (the
//! algorithms of `tollgate_core::algorithm`, over the same integers, each reading a state in
//! its quota's terms first), `taking.lua` (up-to and debt items, and the debt key) and
//! `main.lua` (the operations; a check is all-or-nothing inside one
//! execution, a refund with a marker happens once).

use std::sync::LazyLock;
use std::time::Duration;

use redis::{Cmd, Script};
use smallvec::SmallVec;
use tollgate_core::store_kit;
use tollgate_core::{
    Algorithm, Charge, Decision, ItemDecision, Quota, RefusalReason, StoreError, StoreErrorKind,
    Timestamp,
};

const SOURCE: &str = concat!(
    include_str!("lua/prelude.lua"),
    "\n",
    include_str!("lua/state.lua"),
    "\n",
    include_str!("lua/algorithms.lua"),
    "\n",
    include_str!("lua/taking.lua"),
    "\n",
    include_str!("lua/main.lua"),
);

static SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(SOURCE));

/// The script's source, for tools that load or benchmark it (`redis-benchmark`).
pub(crate) fn source() -> &'static str {
    SOURCE
}

/// The script's SHA-1, as `EVALSHA` names it.
pub(crate) fn sha() -> &'static str {
    SCRIPT.get_hash()
}

/// What the script is asked to do.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Operation {
    Check,
    /// A check that leaves shadow items uncharged (reporting them as a peek would): one slot's
    /// part of a request split over several slots.
    Enforce,
    Peek,
    Refund,
    /// The latest earliest start of the enforcing pacing keys.
    Start,
    /// Extends concurrency holds for their quota's slot ttl.
    Renew,
}

impl Operation {
    fn name(self) -> &'static str {
        match self {
            Operation::Check => "check",
            Operation::Enforce => "enforce",
            Operation::Peek => "peek",
            Operation::Refund => "refund",
            Operation::Start => "start",
            Operation::Renew => "renew",
        }
    }
}

/// Where the script takes "now" from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    /// `None`: the server's `TIME`.
    pub(crate) now: Option<Timestamp>,
    /// Extra key lifetime in ms (non-zero only with a passed-in "now").
    pub(crate) slack_ms: u64,
    /// The earliest any pacing item may start (µs; 0 for no constraint).
    pub(crate) not_before: u64,
    /// When the caller stops waiting, on the server's clock (µs; 0 for no deadline): a check
    /// that starts later charges nothing and answers `TOLLGATE_LATE`.
    pub(crate) deadline: u64,
    /// The same moment on this gateway's clock, taken when the call began (so a cross-slot
    /// check, which runs in a task of its own, keeps its caller's deadline): where a replica
    /// wait must end.
    pub(crate) waited_until: std::time::Instant,
}

/// One item's arguments after its kind: limit, interval, span, then four per operation (check,
/// enforce, peek and start: cost, enforcing, take, 0; refund: the charge's kind and two
/// numbers, and the cost to report the state at afterwards).
pub(crate) struct KeyArgs<'a> {
    pub(crate) key: &'a str,
    pub(crate) quota: &'a Quota,
    pub(crate) extra: [u64; 4],
    /// The caller's debt key, for an up-to or debt item.
    pub(crate) debt_key: Option<&'a str>,
}

/// The script's name for an algorithm.
pub(crate) fn kind(algorithm: Algorithm) -> Option<&'static str> {
    match algorithm {
        Algorithm::TokenBucket => Some("g"),
        Algorithm::LeakyBucket => Some("p"),
        Algorithm::FixedWindow => Some("w"),
        Algorithm::SlidingWindowCounter => Some("s"),
        Algorithm::SlidingWindowLog => Some("l"),
        Algorithm::Concurrency => Some("c"),
        _ => None,
    }
}

/// The error for an algorithm this store does not know.
pub(crate) fn unsupported(algorithm: Algorithm) -> StoreError {
    StoreError::new(
        StoreErrorKind::Protocol,
        format!("the redis store has no script for {}", algorithm.name()),
    )
}

/// The arguments for a charge: its kind and two numbers (scheduled: µs and the TAT right after
/// the charge; window: the window's start and the cost; logged: when and the cost; held: the
/// hold's id and its slots).
pub(crate) fn charge_args(charge: &Charge) -> [u64; 3] {
    match charge {
        Charge::Scheduled { micros, until, .. } => [1, *micros, until.as_micros()],
        Charge::Window { start, cost, .. } => [2, start.as_micros(), *cost],
        Charge::Logged { at, cost, .. } => [3, at.as_micros(), *cost],
        Charge::Held { id, slots, .. } => [4, *id, *slots],
        _ => [0, 0, 0],
    }
}

/// One execution of the script: its keys and arguments, sent as `EVALSHA`, or as `EVAL` (with
/// the source) where the script may be missing and cannot be loaded first (after `ASKING`).
#[derive(Debug, Clone)]
pub(crate) struct ScriptCall {
    keys: SmallVec<[String; 3]>,
    args: Vec<String>,
}

impl ScriptCall {
    /// `EVALSHA <sha> <keys> <args>`.
    pub(crate) fn evalsha(&self) -> Cmd {
        self.command("EVALSHA", sha())
    }

    /// `EVAL <source> <keys> <args>`.
    pub(crate) fn eval(&self) -> Cmd {
        self.command("EVAL", SOURCE)
    }

    /// `SCRIPT LOAD <source>` (a cluster client sends it to every master).
    pub(crate) fn load() -> Cmd {
        let mut command = redis::cmd("SCRIPT");
        command.arg("LOAD").arg(SOURCE);
        command
    }

    /// Adds a refund marker after the items' keys (one per item, in order, or none): the
    /// refund is applied only if the script can set it.
    pub(crate) fn with_marker(mut self, marker: String) -> Self {
        self.keys.push(marker);
        self
    }

    fn command(&self, name: &str, script: &str) -> Cmd {
        let mut command = redis::cmd(name);
        command
            .arg(script)
            .arg(self.keys.len())
            .arg(&self.keys[..])
            .arg(&self.args[..]);
        command
    }
}

/// Builds one execution of the script.
pub(crate) fn invocation<'a>(
    operation: Operation,
    timing: Timing,
    keys: impl IntoIterator<Item = KeyArgs<'a>>,
) -> Result<ScriptCall, StoreError> {
    let now = timing.now.map(|now| now.as_micros().to_string());
    let mut call = ScriptCall {
        keys: SmallVec::new(),
        args: vec![
            operation.name().to_owned(),
            now.unwrap_or_default(),
            timing.slack_ms.to_string(),
            timing.not_before.to_string(),
            timing.deadline.to_string(),
        ],
    };
    // Debt keys follow the state keys, one per item, when any item reads one (an exact item's
    // place holds its state key again, never read as a debt).
    let mut debt_keys: SmallVec<[String; 3]> = SmallVec::new();
    let mut any_debt = false;
    for args in keys {
        let algorithm = args.quota.algorithm();
        let kind = kind(algorithm).ok_or_else(|| unsupported(algorithm))?;
        any_debt |= args.debt_key.is_some();
        debt_keys.push(args.debt_key.unwrap_or(args.key).to_owned());
        call.keys.push(args.key.to_owned());
        call.args.push(kind.to_owned());
        let quota = args.quota;
        let numbers = [quota.limit(), quota.interval_micros(), quota.span_micros()];
        call.args
            .extend(numbers.iter().chain(&args.extra).map(u64::to_string));
    }
    if any_debt {
        call.keys.extend(debt_keys);
    }
    Ok(call)
}

/// Values per key in a check or peek answer.
const ANSWER_STRIDE: usize = 9;

/// A decoded check or peek answer: whether every enforcing key allowed, and each key's answer.
pub(crate) struct Answer {
    pub(crate) allowed: bool,
    pub(crate) items: SmallVec<[ItemDecision; 3]>,
}

/// Decodes `{allowed, now, 9 values per key}` for `expected` keys.
pub(crate) fn decode(reply: &[i64], expected: usize) -> Result<Answer, StoreError> {
    let malformed = || {
        StoreError::new(
            StoreErrorKind::Protocol,
            format!(
                "the redis script answered {} values for {expected} keys",
                reply.len()
            ),
        )
    };
    if reply.len() != 2 + expected * ANSWER_STRIDE {
        return Err(malformed());
    }
    let value = |at: usize| u64::try_from(reply[at]).map_err(|_| malformed());
    let mut items = SmallVec::with_capacity(expected);
    for index in 0..expected {
        let base = 2 + index * ANSWER_STRIDE;
        let [verdict, limit, remaining, reset, wait, charge, a, b, owed] =
            std::array::from_fn(|offset| value(base + offset));
        let (limit, remaining) = (limit?, remaining?);
        let (reset, wait) = (Duration::from_micros(reset?), Duration::from_micros(wait?));
        let decision = match verdict? {
            0 => Decision::allowed(limit, remaining, reset).with_delay(wait),
            1 => Decision::refused(RefusalReason::LimitReached, limit, remaining, reset, wait),
            2 => Decision::refused(
                RefusalReason::CostExceedsLimit,
                limit,
                remaining,
                reset,
                wait,
            ),
            _ => return Err(malformed()),
        };
        let (a, b) = (a?, b?);
        let charge = match charge? {
            0 => None,
            1 => Some(store_kit::scheduled(a, Timestamp::from_micros(b))),
            2 => Some(store_kit::window(Timestamp::from_micros(a), b)),
            3 => Some(store_kit::logged(Timestamp::from_micros(a), b)),
            4 => Some(store_kit::held(a, b)),
            _ => return Err(malformed()),
        };
        let answer = match charge {
            Some(charge) => store_kit::charged(decision, charge),
            None => ItemDecision::uncharged(decision),
        };
        items.push(store_kit::owing(answer, owed?));
    }
    Ok(Answer {
        allowed: value(0)? == 1,
        items,
    })
}
