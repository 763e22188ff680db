//! The rule model: what a rule says (rule.rs), and in files of their own what a request costs
//! it (cost.rs; for a settled rule, where it reads the actual cost: actual_cost.rs), what its
//! refusals do (on_refusal.rs), what a request without its key does (missing_key.rs) and how it
//! escalates (escalation.rs); the set of rules a layer applies and its route table
//! (rule_set.rs, path_index.rs), the patterns routes and exemptions match (path_pattern.rs,
//! grpc_method.rs, exemptions.rs), and per-caller and live quotas (overrides.rs, registry.rs).

pub(crate) mod actual_cost;
pub(crate) mod cost;
pub(crate) mod escalation;
pub(crate) mod exemptions;
pub(crate) mod grpc_method;
pub(crate) mod missing_key;
pub(crate) mod on_refusal;
pub(crate) mod overrides;
pub(crate) mod path_index;
pub(crate) mod path_pattern;
pub(crate) mod registry;
pub(crate) mod rule;
pub(crate) mod rule_set;
