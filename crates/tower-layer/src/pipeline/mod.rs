//! One request through the layer, after the rules are loaded: which rules apply and with what
//! key (plan.rs), what the store's answer means for the request (conclude.rs), which response
//! the layer writes itself (respond.rs; what it is made of is in `headers/`), flagged requests
//! (flag.rs), an escalating rule's strikes (strike.rs), a response stream ended early for a
//! refused inbound message (cut.rs), and what the charges leave to the response (charges.rs,
//! after_response.rs): charges refunded when it says they do not count (refund.rs),
//! concurrency slots held until its body ends (held.rs) and estimates settled with the actual
//! cost when it ends (settling.rs). These files import the rule model, the headers, the
//! observers and the layer's settings, never the layer or the service that drive them.

pub(crate) mod after_response;
pub(crate) mod charges;
pub(crate) mod conclude;
pub(crate) mod cut;
pub(crate) mod flag;
pub(crate) mod held;
pub(crate) mod plan;
pub(crate) mod refund;
pub(crate) mod respond;
pub(crate) mod settling;
pub(crate) mod strike;
