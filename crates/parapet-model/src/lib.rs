//! # parapet-model
//!
//! The rule model every parapet stage shares, and the linear engine that
//! defines what a ruleset means.
//!
//! The data path is parse → **model** → flatten → compile → engine. This
//! crate holds the middle of it:
//!
//! - [`IntervalSet`] and [`Field`]: every match of every frontend lowers to,
//!   per field, a sorted set of closed intervals. Classifiers then see one
//!   problem: first match over d-dimensional boxes.
//! - [`Ruleset`], [`Table`], [`Chain`], [`Rule`]: iptables semantics —
//!   chains, jumps, goto, RETURN, policies, non-terminal LOG.
//! - [`LinearEngine`]: evaluates a ruleset exactly as iptables does. It is
//!   the specification; every other engine is tested against it.
//! - [`flatten`]: one [`DecisionList`] per base chain, the input of the
//!   compiled engines.
//! - [`Packet`]: the header fields a classifier reads.
//! - Analysis: [`Region`] arithmetic (`region.rs`), first-match regions
//!   ([`Walker`], `reach.rs`), [`diff`] and [`lint`].
//!
//! It is also the one home of the words every crate shares: address
//! [`Family`], protocol and service names ([`protocol_number`],
//! [`service_port`]), prefix maths ([`range_to_prefixes`], [`prefix_len`])
//! and the performance|memory [`Policy`].

mod addr_types;
mod chain_findings;
mod common_entries;
mod correlation;
mod depth_first;
mod diff;
mod diff_rules;
mod display;
mod dynset;
mod field;
mod finding;
mod flatten;
mod hashlimit;
mod hook_join;
mod hull_index;
mod interval;
mod linear;
mod lint;
pub mod mac;
mod mark_resolve;
mod mark_set;
mod masked;
mod netbase;
mod nft_bucket;
pub mod owner;
mod packet;
mod policy;
mod proto;
mod quota;
mod reach;
mod recent;
mod region;
pub mod rev_path;
pub mod routing;
mod rule;
mod same_decider;
mod stateful;
mod statistic;
pub mod string_match;
pub mod tcp_option;
mod time_unit;
mod time_window;

pub use addr_types::{addr_type, by_prefix, dataplane_typed, pkt_type, pkt_type_of};
pub use depth_first::Outcome;
pub use diff::{
    diff, diff_every_region, diff_holding, DiffReport, Difference, NonTerminalDiff, Unproven,
    HELD_BYTES_PER_BUDGET_CUBE,
};
pub use diff_rules::{diff_rules, NonTerminal};
pub use display::{format_set, format_value};
pub use dynset::{
    timeout_jiffies as dynset_timeout_jiffies, Dynset, DynsetCheck, DynsetDecl, DynsetElement,
    DynsetInitial, DynsetKey, DynsetOp, DynsetPort, DynsetTables, ElementLimit, ElementRate,
    DEFAULT_SIZE as DYNSET_DEFAULT_SIZE, MAX_LIMIT_BURST as DYNSET_MAX_LIMIT_BURST,
    MAX_LIMIT_RATE as DYNSET_MAX_LIMIT_RATE,
};
pub use field::{ct_status, tcp_flags, CtState, Family, Field, IfName};
pub use finding::{Explain, Finding, FindingKind};
pub use flatten::{
    flatten, flatten_marks_unresolved, flatten_unpruned, flatten_with_limit, DecisionList, Entry,
    EntryKind, FlattenError, DEFAULT_MAX_ENTRIES,
};
pub use hashlimit::{
    credits_per_jiffy as hashlimit_credits_per_jiffy, hashlimit_key, hashlimit_step,
    mode_names as hashlimit_mode_names, msecs_to_jiffies, user2credits as hashlimit_user2credits,
    Hashlimit, HashlimitBucket, HashlimitKey, HashlimitTables,
    DEFAULT_BURST as HASHLIMIT_DEFAULT_BURST, MAX_BURST as HASHLIMIT_MAX_BURST,
    MAX_CREDIT_FACTOR as HASHLIMIT_MAX_CREDIT_FACTOR, MODE_DSTIP as HASHLIMIT_DSTIP,
    MODE_DSTPORT as HASHLIMIT_DSTPORT, MODE_SRCIP as HASHLIMIT_SRCIP,
    MODE_SRCPORT as HASHLIMIT_SRCPORT, SCALE as HASHLIMIT_SCALE,
};
pub use hook_join::join_at_hook;
pub use interval::{prefix_len, prefix_range, range_to_prefixes, width_mask, IntervalSet};
pub use linear::{Decision, EvalError, LinearEngine, NoSets, SetLookup, TraceStep, MAX_DEPTH};
pub use lint::{lint, lint_with, LintOptions, LintReport};
pub use mark_resolve::{
    reads_mark, rewrite as rewrite_for_mark, MarkRewriteError, MarkTable, MAX_MARK_FORKS,
};
pub use mark_set::{MarkSet, MaskedPreimage, MAX_PREIMAGE_INTERVALS};
pub use masked::MaskedMatch;
pub use packet::{from_ip, to_ip, CtAddrs, Packet, PacketSpecError, CT_ADDR_FIELDS};
pub use policy::Policy;
pub use proto::{protocol_name, protocol_number, service_port, PROTOCOLS, SERVICES};
pub use quota::Quota;
pub use reach::{Settle, Stop, Walker};
pub use recent::{
    masked, seen_ttl as recent_seen_ttl, table_id, Recent, RecentCheck, RecentCommand, RecentEntry,
    RecentTable, RecentTables, DEFAULT_NAME as RECENT_DEFAULT_NAME, IP_LIST_TOT,
    MAX_HITCOUNT as RECENT_MAX_HITCOUNT, STAMPS as RECENT_STAMPS,
};
pub use region::{Budget, Cube, OverBudget, Region, Space};
pub use rule::transport_header_field;
pub use rule::{
    Action, BaseChain, Chain, ChainId, Condition, Counters, Dir, Hook, LeftToKernel, Limit,
    LimitFlavor, LogSpec, Matches, Origin, Rule, Ruleset, SetKeySpec, SetRef, StatefulKind, Table,
    TableFamily, TimeUnit, Verdict, LOG_OPTIONS,
};
pub use stateful::{
    xt_credits_per_jiffy, xt_user2credits, Assume, Bucket, BucketKey, Clock, NftBucket, Stateful,
    StatefulState, XtBucket, NFT_DEFAULT_BURST, XT_LIMIT_SCALE,
};
pub use statistic::{RandomWords, Statistic, StatisticMode, RANDOM_ONE as STATISTIC_RANDOM_ONE};
pub use time_window::{
    format_date, format_daytime, parse_date, parse_daytime, TimeWindow, ALL_MONTHDAYS,
    ALL_WEEKDAYS, MAX_DATESTOP, WEEKDAY_NAMES,
};
