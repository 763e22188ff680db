//! The rule model: what a rule says (rule.rs), the set of rules a layer applies and its route
//! table (rule_set.rs), the patterns routes and exemptions match (path_pattern.rs,
//! exemptions.rs), per-caller and live quotas (overrides.rs, registry.rs), where a settled rule reads its
//! actual cost (settle.rs), and escalation
//! (escalation.rs).

pub(crate) mod escalation;
pub(crate) mod exemptions;
pub(crate) mod grpc_method;
pub(crate) mod overrides;
pub(crate) mod path_index;
pub(crate) mod path_pattern;
pub(crate) mod registry;
pub(crate) mod rule;
pub(crate) mod rule_set;
pub(crate) mod settle;
