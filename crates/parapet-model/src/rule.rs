//! Rules, chains, tables and rulesets, with iptables' semantics.

use crate::dynset::Dynset;
use crate::field::Field;
use crate::hashlimit::Hashlimit;
use crate::mark_set::MarkSet;
use crate::quota::Quota;
use crate::recent::Recent;
use crate::statistic::Statistic;
pub use crate::time_unit::TimeUnit;
use crate::time_window::TimeWindow;
use serde::{Deserialize, Serialize};

mod action;
mod condition;
mod matches;
pub use action::{Action, LogSpec, Verdict, LOG_OPTIONS};
pub use condition::{Condition, StatefulKind};
pub use matches::{transport_header_field, Matches};

/// `-m limit` / nft `limit rate [over]`: a per-rule token bucket, a
/// stateful condition checked after the rule's other matches (see
/// `stateful.rs` for the kernel's arithmetic, which every engine uses).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Limit {
    /// Tokens added per `per`.
    pub rate: u32,
    /// The time unit of the rate.
    pub per: TimeUnit,
    /// Bucket size.
    pub burst: u32,
    /// Whose arithmetic: iptables' `xt_limit` or nft's `nft_limit`.
    #[serde(default)]
    pub flavor: LimitFlavor,
    /// nft `limit rate over`: matches when the rate is exceeded.
    #[serde(default)]
    pub over: bool,
    /// nft `limit name "NAME"`: the table's named limit object; every rule
    /// naming it shares its one bucket (else the bucket is the rule's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
}

/// Which kernel implementation a limit follows (their rounding differs).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LimitFlavor {
    /// `xt_limit.c`: credits per jiffy.
    #[default]
    Xt,
    /// `nft_limit.c`: nanosecond tokens.
    Nft,
}

/// Packet and byte counters.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Counters {
    /// Packets.
    pub packets: u64,
    /// Bytes.
    pub bytes: u64,
}

/// Which address, port or interface of the packet a set key part reads.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Dir {
    /// The source.
    Src,
    /// The destination.
    Dst,
}

/// A named set a rule refers to, and how the packet's key is built for it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SetRef {
    /// The set's name.
    pub name: String,
    /// How to build the lookup key from the packet.
    pub key: SetKeySpec,
}

/// How a set's lookup key is built from the packet.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SetKeySpec {
    /// iptables' `--match-set NAME src,dst`: one direction flag per key
    /// dimension; what each dimension is (address, port, interface) is up to
    /// the set's type.
    Flags(Vec<Dir>),
    /// nft's `ip saddr . tcp dport @NAME`: the packet fields themselves.
    Fields(Vec<Field>),
}

/// Where a rule came from, for messages.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Origin {
    /// 1-based line in the source file; 0 when not from a file.
    pub line: u32,
}

/// One rule: constraints, an action, and what rides along.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    /// 1-based position among all rules of the ruleset, in file order.
    pub id: u32,
    /// What the rule matches.
    pub matches: Matches,
    /// What it does when it matches.
    pub action: Action,
    /// `-m comment --comment` / nft `comment`.
    pub comment: Option<String>,
    /// `-m limit` / nft `limit rate`: the rule matches only when its bucket
    /// admits the packet (checked after every other match).
    pub limit: Option<Limit>,
    /// `-m recent`: the rule matches only when its table answers yes
    /// (checked after every other match; with a limit or hashlimit too,
    /// in [`Rule::stateful_order`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recent: Option<Recent>,
    /// `-m hashlimit`: the rule matches only when its table's bucket for
    /// the packet's key answers yes (checked as `recent` is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hashlimit: Option<Hashlimit>,
    /// `-m time` / nft `meta time|hour|day`: the rule matches only while
    /// the window is open (a condition on the clock, checked before the
    /// stateful one; it keeps no state).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<TimeWindow>,
    /// nft dynamic set: `add`/`update`/`delete @s { … }` or `ip saddr @s`
    /// on a set rules fill (checked as `recent` is; a rule has at most one
    /// stateful condition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynset: Option<Dynset>,
    /// A membership test of a dynamic set written before the rule's
    /// dynamic-set statement (port knocking: `ip saddr . tcp dport @s add
    /// @s { ip saddr . 10003 }`), checked before it; a lookup alone is
    /// [`Rule::dynset`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynset_lookup: Option<Dynset>,
    /// nft `quota [over] N bytes`: a byte count per rule (checked as
    /// `limit` is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<Quota>,
    /// `-m statistic`: every n-th or a random share of the packets
    /// reaching it (checked as `limit` is; a rule has at most one stateful
    /// condition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statistic: Option<Statistic>,
    /// Matches the kernel checks *after* the stateful condition
    /// (`-p udp -m recent --update … -m udp --dport 123`: the kernel runs a
    /// rule's matches in order, so `--update` records a hit for every UDP
    /// packet, while the rule matches only port 123). When set, it is the
    /// rule's whole conjunction (it includes `matches`), and `matches` is
    /// the part checked before the stateful condition; the rule matches a
    /// packet its stateful condition admits only if this holds too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_stateful: Option<Matches>,
    /// The order of the rule's stateful conditions when it has more than
    /// one (`-m recent --update … -m limit …`): each runs only when every
    /// one before it admitted the packet ([`Rule::conditions`]). Empty
    /// with one condition or none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stateful_order: Vec<StatefulKind>,
    /// Also log when the rule matches, whatever its action: nft's
    /// `log prefix "x" drop` is one rule with a log statement and a verdict.
    /// (iptables writes logging as its own `-j LOG` rule, so this is `None`
    /// for iptables rulesets.) It does not change what the rule decides.
    #[serde(default)]
    pub log: Option<LogSpec>,
    /// `-j MARK` / nft `meta mark set`: when the rule matches, the
    /// packet's mark changes (before its action), and every later rule of
    /// the traversal reads the new mark (`mark_set.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_mark: Option<MarkSet>,
    /// Counters as read from the file (`[p:b]`, nft `counter packets … bytes …`).
    pub counters: Counters,
    /// Where the rule came from.
    pub origin: Origin,
    /// nft statements of the rule that parapet leaves to the kernel, as
    /// written (`ct helper set "ftp"`, `flow add @ft`, `notrack`): they
    /// act on conntrack or offload, decide nothing, and are written back
    /// by the nft renderer. Empty for iptables rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel: Vec<String>,
}

impl Rule {
    /// True when the rule has a stateful condition (`limit`, `recent`,
    /// `hashlimit`): it matches only some of the packets its fields hold
    /// for.
    pub fn is_stateful(&self) -> bool {
        self.limit.is_some()
            || self.recent.is_some()
            || self.hashlimit.is_some()
            || self.time.is_some()
            || self.dynset.is_some()
            || self.dynset_lookup.is_some()
            || self.quota.is_some()
            || self.statistic.is_some()
    }

    /// A time window together with another stateful condition: the
    /// image's entries name one stateful row, so only the linear engine
    /// evaluates such a rule (the compiler refuses it).
    pub fn time_with_another_condition(&self) -> bool {
        self.time.is_some()
            && (self.limit.is_some()
                || self.recent.is_some()
                || self.hashlimit.is_some()
                || self.dynset.is_some()
                || self.dynset_lookup.is_some()
                || self.quota.is_some()
                || self.statistic.is_some())
    }

    /// Every field the rule reads: its whole conjunction, the matches
    /// after its stateful one included (for the checks that ask which
    /// fields a ruleset uses).
    pub fn all_matches(&self) -> &Matches {
        self.after_stateful.as_ref().unwrap_or(&self.matches)
    }

    /// A rule with no comment, limit or counters.
    pub fn new(id: u32, matches: Matches, action: Action) -> Self {
        Rule {
            id,
            matches,
            action,
            comment: None,
            limit: None,
            recent: None,
            hashlimit: None,
            time: None,
            dynset: None,
            dynset_lookup: None,
            quota: None,
            statistic: None,
            after_stateful: None,
            stateful_order: Vec::new(),
            log: None,
            set_mark: None,
            counters: Counters::default(),
            origin: Origin::default(),
            kernel: Vec::new(),
        }
    }
}

/// Where in the stack a base chain is attached.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Hook {
    /// Before routing.
    Prerouting,
    /// Packets for this host.
    Input,
    /// Packets routed through.
    Forward,
    /// Packets from this host.
    Output,
    /// After routing.
    Postrouting,
    /// nft `ingress` / XDP.
    Ingress,
}

impl Hook {
    /// The iptables built-in chain on this hook (`INPUT`).
    pub fn iptables_chain(self) -> &'static str {
        match self {
            Hook::Prerouting => "PREROUTING",
            Hook::Input => "INPUT",
            Hook::Forward => "FORWARD",
            Hook::Output => "OUTPUT",
            Hook::Postrouting => "POSTROUTING",
            Hook::Ingress => "INGRESS",
        }
    }

    /// nft's lower-case name (`input`).
    pub fn nft_name(self) -> &'static str {
        match self {
            Hook::Prerouting => "prerouting",
            Hook::Input => "input",
            Hook::Forward => "forward",
            Hook::Output => "output",
            Hook::Postrouting => "postrouting",
            Hook::Ingress => "ingress",
        }
    }

    /// Parses either spelling.
    pub fn from_name(s: &str) -> Option<Hook> {
        [
            Hook::Prerouting,
            Hook::Input,
            Hook::Forward,
            Hook::Output,
            Hook::Postrouting,
            Hook::Ingress,
        ]
        .into_iter()
        .find(|h| h.nft_name().eq_ignore_ascii_case(s))
    }
}

/// A base chain's attachment: where, in what order, and the default verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaseChain {
    /// The hook.
    pub hook: Hook,
    /// nft priority; 0 for iptables.
    pub priority: i32,
    /// What happens to packets no rule decides.
    pub policy: Verdict,
    /// Policy counters.
    pub counters: Counters,
}

/// A named list of rules.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chain {
    /// The chain's name.
    pub name: String,
    /// Set for base chains (built-in chains, nft chains with a hook).
    pub base: Option<BaseChain>,
    /// The rules, in order.
    pub rules: Vec<Rule>,
}

/// Which families a table's rules apply to.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TableFamily {
    /// iptables / nft `ip`.
    Ip,
    /// ip6tables / nft `ip6`.
    Ip6,
    /// nft `inet`: both.
    Inet,
}

impl TableFamily {
    /// nft's name for the family.
    pub fn nft_name(self) -> &'static str {
        match self {
            TableFamily::Ip => "ip",
            TableFamily::Ip6 => "ip6",
            TableFamily::Inet => "inet",
        }
    }
}

/// A table of chains.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Table {
    /// The table's name (`filter`).
    pub name: String,
    /// Which packets its rules see.
    pub family: TableFamily,
    /// The chains, in file order.
    pub chains: Vec<Chain>,
}

/// A whole ruleset, as parsed from one file.
///
/// Rule constraints already include their family (an iptables-save rule
/// carries `family == 4`), so tables of different families can be evaluated
/// side by side.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ruleset {
    /// Tables in file order.
    pub tables: Vec<Table>,
    /// Set references; [`Field::Set`]`(n)` refers to `set_refs[n]`.
    pub set_refs: Vec<SetRef>,
    /// Tables of the file that parapet does not enforce and leaves to the
    /// kernel's netfilter, where they stay (`*nat`, `*mangle`, `*raw`,
    /// `*security`): reported by `check` and `apply`, written back verbatim
    /// by the renderers, never removed from the kernel. Their rules keep
    /// their places in the rule numbering.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_to_kernel: Vec<LeftToKernel>,
}

/// One table parapet leaves to the kernel: its name, chains with their rule
/// counts, and its text as the file had it (from `*table` to `COMMIT`).
///
/// Its rules are checked for structure only (quoting, `-A CHAIN` of a
/// declared chain): their matches and targets are the kernel's business.
/// They keep their ids (positions in the file), so the enforced rules
/// after them keep theirs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftToKernel {
    /// Table family (`ip` or `ip6`).
    pub family: TableFamily,
    /// Table name, like `nat`.
    pub table: String,
    /// Line of `*table` in the file (0 when not from a file).
    pub line: u32,
    /// Chains in declaration order, each with its number of rules.
    pub chains: Vec<(String, usize)>,
    /// The table's lines, verbatim, `*table` through `COMMIT`; for an nft
    /// chain, its `chain NAME { … }` block.
    pub text: String,
    /// True for one nft chain (`type nat`/`type route`, or a regular chain
    /// only they jump to): `chains` holds that one chain and `text` its block.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nft: bool,
    /// nft: the id of the chain's first rule (0 when it has none), so a
    /// listing writes the chain back where its rules keep their ids.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub first_id: u32,
    /// nft, when it is not a chain: the object as nft names it. `table arp
    /// filter` is a whole table of another family (`arp`, `bridge`,
    /// `netdev`; `family` is then unused and `chains` are its chains);
    /// `flowtable ft`, `ct helper ftp`, `ct timeout t`, `ct expectation e`,
    /// `synproxy s`, `secmark s` are objects of table `family table`
    /// (`chains` empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl LeftToKernel {
    /// Rules of all its chains.
    pub fn rule_count(&self) -> usize {
        self.chains.iter().map(|(_, n)| n).sum()
    }

    /// `nat (PREROUTING 2 rules, POSTROUTING 1 rule)`: for summaries; an
    /// nft chain reads `inet fw4 (dstnat 3 rules)`.
    pub fn describe(&self) -> String {
        if let Some(o) = self
            .object
            .as_ref()
            .filter(|_| !self.is_other_family_table())
        {
            return format!("{} {} {o}", self.family.nft_name(), self.table);
        }
        let table = if let Some(t) = self.object.as_ref().and_then(|o| o.strip_prefix("table ")) {
            t.to_string()
        } else if self.nft {
            format!("{} {}", self.family.nft_name(), self.table)
        } else {
            self.table.clone()
        };
        let chains: Vec<String> = self
            .chains
            .iter()
            .map(|(c, n)| format!("{c} {n} rule{}", if *n == 1 { "" } else { "s" }))
            .collect();
        if chains.is_empty() && self.object.is_some() {
            return table;
        }
        format!("{table} ({})", chains.join(", "))
    }

    /// [`describe`](Self::describe) of each, with the table objects of one
    /// kind in one table written once: `inet fw4 ct helper ftp, sip`.
    pub fn summary(all: &[LeftToKernel]) -> Vec<String> {
        let mut out: Vec<(Option<String>, String)> = Vec::new();
        for l in all {
            let object = l.object.as_ref().filter(|_| {
                !l.text.is_empty() && l.chains.is_empty() && !l.is_other_family_table()
            });
            let Some((kind, name)) = object.and_then(|o| o.rsplit_once(' ')) else {
                out.push((None, l.describe()));
                continue;
            };
            let group = format!("{} {} {kind}", l.family.nft_name(), l.table);
            match out.iter_mut().find(|(g, _)| g.as_deref() == Some(&group)) {
                Some((_, text)) => {
                    text.push_str(", ");
                    text.push_str(name);
                }
                None => out.push((Some(group.clone()), format!("{group} {name}"))),
            }
        }
        out.into_iter().map(|(_, t)| t).collect()
    }

    /// True for a whole nft table of another family (`object` is `table
    /// FAMILY NAME`).
    pub fn is_other_family_table(&self) -> bool {
        self.object
            .as_ref()
            .is_some_and(|o| o.starts_with("table "))
    }
}

/// Identifies a chain inside a ruleset.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct ChainId {
    /// Index into [`Ruleset::tables`].
    pub table: usize,
    /// Index into the table's chains.
    pub chain: usize,
}

impl Ruleset {
    /// Returns the index of a set reference, adding it if new.
    pub fn intern_set_ref(&mut self, set_ref: SetRef) -> u16 {
        if let Some(i) = self.set_refs.iter().position(|s| *s == set_ref) {
            return i as u16;
        }
        self.set_refs.push(set_ref);
        (self.set_refs.len() - 1) as u16
    }

    /// Every rule, in id order.
    pub fn rules(&self) -> impl Iterator<Item = &Rule> {
        self.tables
            .iter()
            .flat_map(|t| t.chains.iter().flat_map(|c| c.rules.iter()))
    }

    /// Number of rules.
    pub fn rule_count(&self) -> usize {
        self.rules().count()
    }

    /// The chain called `name` in table `table`.
    pub fn find_chain(&self, table: &str, name: &str) -> Option<ChainId> {
        self.tables.iter().enumerate().find_map(|(ti, t)| {
            if t.name != table {
                return None;
            }
            t.chains
                .iter()
                .position(|c| c.name == name)
                .map(|ci| ChainId {
                    table: ti,
                    chain: ci,
                })
        })
    }

    /// Resolves a `--chain` argument: `TABLE/CHAIN`, `CHAIN` (table
    /// `filter`), or, when neither names a chain, the one base chain on the
    /// input hook. `None` when nothing or more than one chain fits.
    pub fn select_chain(&self, spec: Option<&str>) -> Result<ChainId, String> {
        if let Some(spec) = spec {
            let (table, chain) = spec.split_once('/').unwrap_or(("filter", spec));
            if let Some(id) = self.find_chain(table, chain) {
                return Ok(id);
            }
            // nft chains are lower-case (`input`); accept `INPUT` for them.
            let matching: Vec<ChainId> = self
                .chain_ids()
                .filter(|id| {
                    let (t, c) = (
                        &self.tables[id.table],
                        &self.tables[id.table].chains[id.chain],
                    );
                    (!spec.contains('/') || t.name == table) && c.name.eq_ignore_ascii_case(chain)
                })
                .collect();
            return match matching.as_slice() {
                [one] => Ok(*one),
                [] => Err(format!("no chain '{spec}' in the ruleset")),
                _ => Err(format!(
                    "chain name '{spec}' is ambiguous; write TABLE/CHAIN"
                )),
            };
        }
        if let Some(id) = self.find_chain("filter", "INPUT") {
            return Ok(id);
        }
        let inputs: Vec<ChainId> = self
            .chain_ids()
            .filter(|id| {
                self.chain(*id)
                    .base
                    .as_ref()
                    .is_some_and(|b| b.hook == Hook::Input)
            })
            .collect();
        match inputs.as_slice() {
            [one] => Ok(*one),
            [] => Err("the ruleset has no filter/INPUT chain and no base chain on the input hook; name one with --chain".into()),
            _ => Err("several base chains hook input; name one with --chain TABLE/CHAIN".into()),
        }
    }

    fn chain_ids(&self) -> impl Iterator<Item = ChainId> + '_ {
        self.tables.iter().enumerate().flat_map(|(ti, t)| {
            (0..t.chains.len()).map(move |ci| ChainId {
                table: ti,
                chain: ci,
            })
        })
    }

    /// The chain with this id.
    pub fn chain(&self, id: ChainId) -> &Chain {
        &self.tables[id.table].chains[id.chain]
    }

    /// Gives rules ids 1..=n in file order (tables, then chains, then rules).
    pub fn renumber(&mut self) {
        let mut next = 1;
        for t in &mut self.tables {
            for c in &mut t.chains {
                for r in &mut c.rules {
                    r.id = next;
                    next += 1;
                }
            }
        }
    }
}
