//! Which chain runs at which netfilter hook, and what a ruleset means where
//! it is placed (docs/hooks.md).
//!
//! `parapet attach` without an interface enforces the ruleset's filter base
//! chains at their own hooks: INPUT at `NF_INET_LOCAL_IN`, FORWARD at
//! `NF_INET_FORWARD`, OUTPUT at `NF_INET_LOCAL_OUT`, nft filter chains at
//! prerouting and postrouting at `NF_INET_PRE_ROUTING` and
//! `NF_INET_POST_ROUTING`, each with its own
//! classifier image, one link per family its table covers, at the chain's
//! priority (0 for iptables, the nft base chain's otherwise). [`hook_plan`]
//! works that out from a compiled ruleset; [`warnings`] says where a rule
//! means something else than the same rule in the kernel would.

use crate::compiled::CompiledChain;
use parapet_dataplane::{NfFamily, NfHook};
use parapet_model::{Action, ChainId, Field, Hook, Rule, Ruleset, TableFamily};

/// One netfilter link the active ruleset wants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NfWant {
    /// Hook.
    pub hook: NfHook,
    /// Family.
    pub family: NfFamily,
    /// The chain's priority.
    pub priority: i32,
}

/// The chains at the netfilter hooks of one ruleset.
#[derive(Clone, Debug, Default)]
pub struct HookPlan<'a> {
    /// The chain compiled for each hook that has one.
    pub chains: Vec<(NfHook, &'a CompiledChain)>,
    /// The links to make.
    pub links: Vec<NfWant>,
    /// Some hook chain matches ctstate: the kernel must track connections.
    pub needs_ct: bool,
    /// The hook chains' rules that match the socket owner (`-m owner`,
    /// `meta skuid|skgid`), as "rules 3, 4 of filter/OUTPUT": only the
    /// netfilter program reads the owner (the tc placement refuses them).
    pub owner: Option<String>,
    /// The hook chains' rules with a reverse-path check (`fib saddr [.
    /// iif] oif`), as "rules 1 of inet/filter/prerouting": the netfilter
    /// program has no `bpf_fib_lookup` (only the tc placement and the
    /// interfaces look sources up).
    pub rev_path: Option<String>,
}

fn nf_hook(h: Hook) -> Option<NfHook> {
    match h {
        Hook::Input => Some(NfHook::Input),
        Hook::Forward => Some(NfHook::Forward),
        Hook::Output => Some(NfHook::Output),
        Hook::Prerouting => Some(NfHook::Prerouting),
        Hook::Postrouting => Some(NfHook::Postrouting),
        Hook::Ingress => None,
    }
}

fn families(f: TableFamily) -> &'static [NfFamily] {
    match f {
        TableFamily::Ip => &[NfFamily::Ipv4],
        TableFamily::Ip6 => &[NfFamily::Ipv6],
        TableFamily::Inet => &NfFamily::ALL,
    }
}

/// The chains at INPUT, FORWARD, OUTPUT, PREROUTING and POSTROUTING: one
/// image per hook. Several
/// base chains at one hook (nft chains of different priorities, in one
/// table or several: `inet filter input` beside `ip filter input`) run as
/// the one classifier the loader compiled for them
/// ([`CompiledChain::joined`]), in the kernel's order; each family's link
/// sits at the priority of the first of them that family meets (a host's
/// own chain between two of their priorities runs before or after all of
/// them). An error when that classifier is missing.
pub fn hook_plan<'a>(rs: &Ruleset, compiled: &'a [CompiledChain]) -> Result<HookPlan<'a>, String> {
    let mut plan = HookPlan::default();
    let mut at: Vec<(NfHook, Vec<&'a CompiledChain>)> = Vec::new();
    for c in compiled.iter().filter(|c| c.joined.is_empty()) {
        let Some(base) = rs.chain(c.chain).base.as_ref() else {
            continue;
        };
        let Some(hook) = nf_hook(base.hook) else {
            continue;
        };
        match at.iter_mut().find(|(h, _)| *h == hook) {
            Some((_, v)) => v.push(c),
            None => at.push((hook, vec![c])),
        }
    }
    for (hook, chains) in at {
        let placed = match chains.as_slice() {
            [one] => *one,
            several => compiled
                .iter()
                .find(|j| {
                    j.joined.len() == several.len()
                        && several.iter().all(|c| j.joined.contains(&c.chain))
                })
                .ok_or_else(|| {
                    let names: Vec<&str> = several.iter().map(|c| c.name.as_str()).collect();
                    format!(
                        "{} base chains at the {hook} hook ({}) and no classifier for them together",
                        several.len(),
                        names.join(", ")
                    )
                })?,
        };
        plan.chains.push((hook, placed));
        let members = if placed.joined.is_empty() {
            vec![placed.chain]
        } else {
            placed.joined.clone()
        };
        // in the kernel's order: the first chain of a family is its link's
        for id in members {
            let priority = rs.chain(id).base.as_ref().map_or(0, |b| b.priority);
            for &family in families(rs.tables[id.table].family) {
                if !plan
                    .links
                    .iter()
                    .any(|w| w.hook == hook && w.family == family)
                {
                    plan.links.push(NfWant {
                        hook,
                        family,
                        priority,
                    });
                }
            }
            plan.needs_ct |= parapet_dataplane::ruleset::needs_conntrack(rs, id);
        }
    }
    plan.chains.sort_by_key(|(h, _)| *h);
    let owner: Vec<String> = plan
        .chains
        .iter()
        .filter_map(|(_, c)| owner_rules(rs, c))
        .collect();
    plan.owner = (!owner.is_empty()).then(|| owner.join("; "));
    let rev_path: Vec<String> = plan
        .chains
        .iter()
        .filter_map(|(_, c)| chain_rules(rs, c, &[Field::RevPath]))
        .collect();
    plan.rev_path = (!rev_path.is_empty()).then(|| rev_path.join("; "));
    Ok(plan)
}

/// Why the netfilter hooks cannot enforce the plan's reverse-path checks,
/// or `None` when it has none.
pub fn nf_rev_path_refusal(rev_path: Option<&String>) -> Option<String> {
    rev_path.map(|rules| {
        format!(
            "{rules} have a reverse-path check (fib saddr [. iif] oif missing|exists): a \
             netfilter BPF program cannot look routes up (bpf_fib_lookup is offered to XDP \
             and tc programs only), so parapet enforces it at an interface (`parapet attach \
             IFACE`) or in the tc placement (parapetd --hook-placement tc), not at the netfilter \
             hooks"
        )
    })
}

/// `rules 3, 4 of NAME` when rules `c` can reach constrain any of
/// `fields`, else `None`.
fn chain_rules(rs: &Ruleset, c: &CompiledChain, fields: &[Field]) -> Option<String> {
    let mut chains = vec![c.chain];
    chains.extend(c.joined.iter().copied());
    let mut hit: Vec<&Rule> = Vec::new();
    for id in chains {
        for r in rules_matching(&reachable(rs, id), fields) {
            if !hit.iter().any(|h| h.id == r.id) {
                hit.push(r);
            }
        }
    }
    (!hit.is_empty()).then(|| format!("rules {} of {}", ids(&hit), c.name))
}

/// `rules 3, 4 of filter/OUTPUT` when rules `c` can reach match the socket
/// owner (`-m owner`, `meta skuid|skgid`), else `None`: the owner is read
/// only at the netfilter LOCAL_OUT and POST_ROUTING hooks, never at an
/// interface (xdp, tc), where a packet has no socket yet or any more.
pub fn owner_rules(rs: &Ruleset, c: &CompiledChain) -> Option<String> {
    let mut chains = vec![c.chain];
    chains.extend(c.joined.iter().copied());
    let mut hit: Vec<&Rule> = Vec::new();
    for id in chains {
        for r in rules_matching(&reachable(rs, id), &[Field::SkUid, Field::SkGid]) {
            if !hit.iter().any(|h| h.id == r.id) {
                hit.push(r);
            }
        }
    }
    (!hit.is_empty()).then(|| format!("rules {} of {}", ids(&hit), c.name))
}

/// The rules a packet entering `chain` can meet (its own and those of the
/// chains it jumps or goes to), each once.
fn reachable(rs: &Ruleset, chain: ChainId) -> Vec<&Rule> {
    let mut seen = vec![chain];
    let mut todo = vec![chain];
    let mut out = Vec::new();
    while let Some(id) = todo.pop() {
        let table = &rs.tables[id.table].name;
        for r in &rs.chain(id).rules {
            out.push(r);
            if let Action::Jump(to) | Action::Goto(to) = &r.action {
                if let Some(next) = rs.find_chain(table, to) {
                    if !seen.contains(&next) {
                        seen.push(next);
                        todo.push(next);
                    }
                }
            }
        }
    }
    out.sort_by_key(|r| r.id);
    out
}

fn ids(rules: &[&Rule]) -> String {
    let v: Vec<String> = rules.iter().take(8).map(|r| r.id.to_string()).collect();
    let more = rules.len().saturating_sub(8);
    if more > 0 {
        format!("{} and {more} more", v.join(", "))
    } else {
        v.join(", ")
    }
}

fn forwarding_on() -> bool {
    [
        "/proc/sys/net/ipv4/ip_forward",
        "/proc/sys/net/ipv6/conf/all/forwarding",
    ]
    .iter()
    .any(|p| std::fs::read_to_string(p).is_ok_and(|s| s.trim() != "0"))
}

/// What the kernel itself runs at a netfilter hook, by priority, that
/// changes what a later chain sees: conntrack attaches the packet's entry
/// (-200), NAT rewrites destinations (-100) or sources (100).
fn kernel_functions(hook: NfHook) -> &'static [(i32, &'static str)] {
    match hook {
        NfHook::Prerouting | NfHook::Output => &[(-200, "conntrack"), (-100, "DNAT")],
        NfHook::Input | NfHook::Postrouting => &[(100, "SNAT")],
        NfHook::Forward => &[],
    }
}

/// Joined chains (several base chains at one hook, run as one classifier
/// at the first one's priority) with a kernel function between their
/// priorities: the later chains see the packet before that function has
/// run, where the kernel shows it to them after (docs/hooks.md).
fn joined_across_kernel_functions(rs: &Ruleset, plan: &HookPlan<'_>) -> Vec<String> {
    let mut out = Vec::new();
    for (hook, c) in &plan.chains {
        let Some(first) = c.joined.first() else {
            continue;
        };
        let prio = |id: &ChainId| rs.chain(*id).base.as_ref().map_or(0, |b| b.priority);
        let name = |id: &ChainId| format!("{}/{}", rs.tables[id.table].name, rs.chain(*id).name);
        let low = prio(first);
        for id in &c.joined[1..] {
            for (at, what) in kernel_functions(*hook) {
                if low < *at && prio(id) > *at {
                    out.push(format!(
                        "{} (priority {}) runs joined with {} at priority {low} at {hook}: the \
                         kernel's {what} (priority {at}) sits between them, so {} sees packets \
                         before {what} here, after it in the kernel",
                        name(id),
                        prio(id),
                        name(first),
                        name(id)
                    ));
                }
            }
        }
    }
    out
}

/// Fields an interface hook (xdp, tc ingress) does not read, or reads
/// differently, and what a rule matching them meets there: one entry per
/// warning `apply` gives for a chain placed at an interface.
const ABSENT_AT_INTERFACE: &[(&[Field], &str)] = &[
    (
        &[Field::OutIface],
        "match the output interface (-o), which is not known yet at an interface hook \
         (xdp, tc ingress): they never match there",
    ),
    (
        &[Field::CtStatus],
        "match the conntrack status (ct status, --ctstate SNAT/DNAT), which an interface \
         hook (xdp, tc ingress) does not read: there the status is 0 (no bit set)",
    ),
    (
        &[Field::CtProto, Field::CtOrigDstPort, Field::CtOrigSrcPort],
        "match the conntrack entry's protocol or original ports (--ctproto, --ctorigdstport, \
         --ctorigsrcport, ct protocol, ct original proto-dst|proto-src), which an interface \
         hook (xdp, tc ingress) does not read: there they are 0",
    ),
    (
        &[Field::Mark, Field::CtMark],
        "match the packet mark or the conntrack mark (-m mark, -m connmark, meta mark, ct \
         mark): at xdp both are 0; at tc ingress the conntrack mark is 0 and the packet mark \
         only what was set before parapet (usually 0); the netfilter hooks read both",
    ),
    (
        &[Field::PktType],
        "match the packet type (-m pkttype, meta pkttype): at xdp it comes from the \
         destination MAC alone, so a frame to another host's MAC (otherhost) counts as host \
         there; tc ingress and the netfilter hooks read the kernel's",
    ),
];

/// The rules that constrain any of `fields` (as a range or a mask).
fn rules_matching<'r>(rules: &[&'r Rule], fields: &[Field]) -> Vec<&'r Rule> {
    rules
        .iter()
        .copied()
        .filter(|r| {
            r.all_matches().iter().any(|(f, _)| fields.contains(f))
                || r.all_matches()
                    .masked()
                    .iter()
                    .any(|m| fields.contains(&m.field))
        })
        .collect()
}

/// What changes meaning where the ruleset is placed: `iface_chain` is the
/// chain placed on interfaces (XDP/tc) when any is attached there, `nf`
/// whether the netfilter hooks are attached.
pub fn warnings(
    rs: &Ruleset,
    compiled: &[CompiledChain],
    iface_chain: Option<&CompiledChain>,
    nf: bool,
) -> Vec<String> {
    let mut out: Vec<String> = parapet_dataplane::ruleset::mark_note(rs)
        .into_iter()
        .collect();
    if let Some(c) = iface_chain {
        let rules = reachable(rs, c.chain);
        for (fields, what) in ABSENT_AT_INTERFACE {
            let hit = rules_matching(&rules, fields);
            if !hit.is_empty() {
                out.push(format!("rules {} of {} {what}", ids(&hit), c.name));
            }
        }
        let hit = rules_matching(&rules, &[Field::RevPath]);
        if !hit.is_empty() {
            out.push(format!(
                "rules {} of {} have a reverse-path check: the interface hooks look each \
                 packet's source up (bpf_fib_lookup from lo, as nft's fib does), so parapet \
                 turned forwarding on at lo (net.ipv4.conf.lo.forwarding, \
                 net.ipv6.conf.lo.forwarding); writing net.ipv4.ip_forward turns it off \
                 again until the next apply, and meanwhile the walk is abandoned and the \
                 interim classifier decides (the chain's policy; stats counts them as image \
                 errors)",
                ids(&hit),
                c.name
            ));
        }
        let hook = rs.chain(c.chain).base.as_ref().map(|b| b.hook);
        if hook == Some(Hook::Input) && forwarding_on() {
            out.push(format!(
                "forwarding is on: at an interface hook {} judges every arriving packet, \
                 forwarded ones too, before routing; `parapet attach` without an interface \
                 enforces INPUT and FORWARD where the kernel does",
                c.name
            ));
        }
        if rs.left_to_kernel.iter().any(|t| {
            t.table == "nat" && t.chains.iter().any(|(ch, n)| ch == "PREROUTING" && *n > 0)
        }) {
            out.push(format!(
                "the kernel's nat PREROUTING rewrites addresses after an interface hook: {} sees \
                 them before DNAT there",
                c.name
            ));
        }
    }
    if nf {
        match hook_plan(rs, compiled) {
            Err(e) => out.push(e),
            Ok(plan) => {
                out.extend(joined_across_kernel_functions(rs, &plan));
                let other: Vec<&str> = compiled
                    .iter()
                    .filter(|c| {
                        c.joined.is_empty()
                            && rs
                                .chain(c.chain)
                                .base
                                .as_ref()
                                .is_some_and(|b| nf_hook(b.hook).is_none())
                    })
                    .map(|c| c.name.as_str())
                    .collect();
                if !other.is_empty() {
                    out.push(format!(
                        "base chains {} are not at a netfilter hook (nft ingress): not \
                         enforced at the netfilter hooks",
                        other.join(", ")
                    ));
                }
            }
        }
    }
    out
}

/// What the hook chains mean differently in the tc placement (kernels
/// without netfilter BPF links, or parapetd `--hook-placement tc`): see
/// docs/hooks.md, *Without netfilter BPF links*.
pub fn tc_placement_warnings(rs: &Ruleset, compiled: &[CompiledChain]) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(plan) = hook_plan(rs, compiled) else {
        return out;
    };
    let at = |h: NfHook| plan.chains.iter().find(|(x, _)| *x == h).map(|(_, c)| *c);
    let dnat = rs.left_to_kernel.iter().any(|t| {
        t.table == "nat"
            && t.chains
                .iter()
                .any(|(ch, n)| ch.eq_ignore_ascii_case("prerouting") && *n > 0)
    });
    if dnat && (at(NfHook::Input).is_some() || at(NfHook::Forward).is_some()) {
        out.push(
            "tc placement: the kernel's nat PREROUTING rewrites addresses after tc ingress: \
             INPUT and FORWARD see a packet's addresses before DNAT, and a packet DNAT'ed \
             to another host is judged by INPUT (it is addressed to this host there)"
                .to_string(),
        );
    }
    let snat = rs.left_to_kernel.iter().any(|t| {
        t.table == "nat"
            && t.chains
                .iter()
                .any(|(ch, n)| ch.eq_ignore_ascii_case("postrouting") && *n > 0)
    });
    if snat && at(NfHook::Forward).is_some() {
        out.push(
            "tc placement: the kernel's nat POSTROUTING (masquerade/SNAT) is reversed after tc \
             ingress: replies of translated connections arrive addressed to this host and are \
             judged by INPUT, not FORWARD"
                .to_string(),
        );
    }
    for (_, c) in &plan.chains {
        let rules = reachable(rs, c.chain);
        let status = rules_matching(&rules, &[Field::CtStatus]);
        if !status.is_empty() {
            out.push(format!(
                "tc placement: rules {} of {} match the conntrack status, which tc does not \
                 read: the status is 0 (no bit set) there",
                ids(&status),
                c.name
            ));
        }
    }
    if let Some(c) = at(NfHook::Output) {
        out.push(format!(
            "tc placement: {} judges the packets this host sends from a socket; packets the \
             kernel makes without one pass",
            c.name
        ));
    }
    if let Some(c) = at(NfHook::Postrouting) {
        // tc egress runs after SNAT: the lookup's tuple is the translated
        // one, which no conntrack entry has (ct_result in
        // bpf/lib/conntrack.h then says NEW or INVALID)
        let rules = reachable(rs, c.chain);
        let ct = rules_matching(&rules, POSTROUTING_CT_FIELDS);
        if !ct.is_empty() {
            out.push(format!(
                "tc placement: rules {} of {} match the conntrack state or entry, looked up \
                 at tc egress with the packet's tuple after SNAT: for a masqueraded or \
                 SNAT'ed connection conntrack finds no entry there, so its packets are NEW \
                 (INVALID for TCP other than a SYN or an ACK) and the entry's fields 0, not \
                 what the kernel's chain sees; docs/hooks.md, *Before and after routing at tc*",
                ids(&ct),
                c.name
            ));
        }
    }
    out
}

/// What a postrouting chain reads from the conntrack entry (the status is
/// warned of at every hook of the tc placement already).
const POSTROUTING_CT_FIELDS: &[Field] = &[
    Field::CtState,
    Field::CtOrigDstPort,
    Field::CtOrigSrcPort,
    Field::CtProto,
    Field::CtMark,
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compiled::Loader;
    use crate::loader::ParseLoader;

    fn load(text: &str) -> crate::compiled::CompiledRuleset {
        ParseLoader::default().load("t", text, None).unwrap()
    }

    const IPT: &str = "*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p tcp --dport 22 -j ACCEPT
-A INPUT -p tcp --dport 23 -j REJECT --reject-with tcp-reset
-A FORWARD -o eth1 -p udp -j ACCEPT
-A OUTPUT -p udp --dport 9 -j DROP
COMMIT
";

    #[test]
    fn ct_status_needs_conntrack_and_is_not_read_on_interfaces() {
        let c = load(
            "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n\
             -A FORWARD -m conntrack --ctstate DNAT -j ACCEPT\nCOMMIT\n",
        );
        let plan = hook_plan(&c.ruleset, &c.compiled).unwrap();
        assert!(plan.needs_ct, "ct status at FORWARD");
        let fwd = c.compiled.iter().find(|x| x.name == "filter/FORWARD");
        let w = warnings(&c.ruleset, &c.compiled, fwd, false);
        assert!(
            w.iter()
                .any(|m| m.starts_with("rules 1 of filter/FORWARD match the conntrack status")),
            "{w:?}"
        );
        assert!(warnings(&c.ruleset, &c.compiled, None, true).is_empty());
    }

    #[test]
    fn ct_original_tuple_is_not_read_on_interfaces() {
        let c = load(
            "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n\
             -A INPUT -p tcp --dport 22 -j ACCEPT\n\
             -A INPUT -m conntrack --ctproto 17 --ctorigdstport 53 -j ACCEPT\nCOMMIT\n",
        );
        let plan = hook_plan(&c.ruleset, &c.compiled).unwrap();
        assert!(plan.needs_ct, "a tracked state is implied");
        let input = c.compiled.iter().find(|x| x.name == "filter/INPUT");
        let w = warnings(&c.ruleset, &c.compiled, input, false);
        assert!(
            w.iter().any(|m| m.starts_with(
                "rules 2 of filter/INPUT match the conntrack entry's protocol or original"
            )),
            "{w:?}"
        );
        assert!(warnings(&c.ruleset, &c.compiled, None, true).is_empty());
    }

    #[test]
    fn reverse_path_warns_at_interfaces() {
        let c = load(
            "table inet t {\n\tchain pre {\n\t\ttype filter hook prerouting priority -300; \
             policy accept;\n\t\tudp dport 53 accept\n\t\tfib saddr . iif oif missing \
             drop\n\t}\n}\n",
        );
        let pre = c.compiled.iter().find(|x| x.name.ends_with("pre"));
        let w = warnings(&c.ruleset, &c.compiled, pre, false);
        assert!(
            w.iter().any(|m| m.contains("have a reverse-path check")
                && m.contains("net.ipv4.conf.lo.forwarding")),
            "{w:?}"
        );
        let plan = hook_plan(&c.ruleset, &c.compiled).unwrap();
        let why = nf_rev_path_refusal(plan.rev_path.as_ref()).unwrap();
        assert!(
            why.starts_with("rules 2 of ") && why.contains("bpf_fib_lookup"),
            "{why}"
        );
    }

    #[test]
    fn pkttype_compiles_and_warns_at_interfaces() {
        let c = load(
            "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n\
             -A INPUT -p tcp --dport 22 -j ACCEPT\n\
             -A INPUT -m pkttype --pkt-type multicast -j DROP\nCOMMIT\n",
        );
        let input = c.compiled.iter().find(|x| x.name == "filter/INPUT");
        let w = warnings(&c.ruleset, &c.compiled, input, false);
        assert!(
            w.iter()
                .any(|m| m.starts_with("rules 2 of filter/INPUT match the packet type")),
            "{w:?}"
        );
        assert!(warnings(&c.ruleset, &c.compiled, None, true).is_empty());
    }

    #[test]
    fn iptables_chains_go_to_their_hooks_for_ipv4() {
        let c = load(IPT);
        let plan = hook_plan(&c.ruleset, &c.compiled).unwrap();
        let hooks: Vec<NfHook> = plan.chains.iter().map(|(h, _)| *h).collect();
        assert_eq!(hooks, [NfHook::Input, NfHook::Forward, NfHook::Output]);
        assert_eq!(plan.links.len(), 3);
        assert!(plan
            .links
            .iter()
            .all(|w| w.family == NfFamily::Ipv4 && w.priority == 0));
        assert!(!plan.needs_ct);
        // at the hooks: no note (REJECT rule 2 is answered by parapetd,
        // src/rejecter.rs); on an interface with FORWARD placed there: its
        // -o rule never matches
        let w = warnings(&c.ruleset, &c.compiled, None, true);
        assert!(w.is_empty(), "{w:?}");
        let fwd = c.compiled.iter().find(|x| x.name == "filter/FORWARD");
        let w = warnings(&c.ruleset, &c.compiled, fwd, false);
        assert!(
            w.iter()
                .any(|m| m.starts_with("rules 3 of filter/FORWARD match the output interface")),
            "{w:?}"
        );
        // nothing attached: nothing to warn about
        assert!(warnings(&c.ruleset, &c.compiled, None, false).is_empty());
    }

    #[test]
    fn nft_inet_chains_cover_both_families_at_their_priority() {
        let c = load(
            "table inet f {
  chain i { type filter hook input priority 10; policy drop; ct state established accept; }
  chain o { type filter hook output priority -5; policy accept; }
}
",
        );
        let plan = hook_plan(&c.ruleset, &c.compiled).unwrap();
        assert_eq!(plan.chains.len(), 2);
        assert!(plan.needs_ct, "ct state at INPUT");
        let mut links: Vec<(NfHook, NfFamily, i32)> = plan
            .links
            .iter()
            .map(|w| (w.hook, w.family, w.priority))
            .collect();
        links.sort();
        assert_eq!(
            links,
            vec![
                (NfHook::Input, NfFamily::Ipv4, 10),
                (NfHook::Input, NfFamily::Ipv6, 10),
                (NfHook::Output, NfFamily::Ipv4, -5),
                (NfHook::Output, NfFamily::Ipv6, -5),
            ]
        );
    }

    #[test]
    fn chains_sharing_a_hook_run_as_one_classifier_at_the_first_priority() {
        let c = load(
            "table inet f {
  chain a { type filter hook input priority 5; policy accept; tcp dport 22 drop; }
  chain b { type filter hook input priority -5; policy accept; }
}
table ip g {
  chain c { type filter hook input priority -10; policy accept; ct state new accept; }
}
",
        );
        let plan = hook_plan(&c.ruleset, &c.compiled).unwrap();
        assert_eq!(plan.chains.len(), 1);
        let placed = plan.chains[0].1;
        assert_eq!(placed.name, "input (g/c then f/b then f/a)");
        assert_eq!(placed.joined.len(), 3);
        assert!(plan.needs_ct, "ct state in g/c");
        let mut links: Vec<(NfFamily, i32)> =
            plan.links.iter().map(|w| (w.family, w.priority)).collect();
        links.sort();
        assert_eq!(links, vec![(NfFamily::Ipv4, -10), (NfFamily::Ipv6, -5)]);
        // without the joined classifier: refused by name
        let plain: Vec<CompiledChain> = c
            .compiled
            .iter()
            .filter(|x| x.joined.is_empty())
            .cloned()
            .collect();
        let e = hook_plan(&c.ruleset, &plain).unwrap_err();
        assert!(e.contains("f/a") && e.contains("g/c"), "{e}");
        // no kernel function between -10 and 5 at INPUT (SNAT is at 100)
        let w = warnings(&c.ruleset, &c.compiled, None, true);
        assert!(w.is_empty(), "{w:?}");
    }

    #[test]
    fn prerouting_chains_joined_across_dnat_are_named() {
        let c = load(
            "table inet f {
  chain a { type filter hook prerouting priority mangle; policy accept; udp dport 7 drop; }
  chain b { type filter hook prerouting priority 0; policy accept; udp dport 8 drop; }
  chain p { type filter hook postrouting priority 300; policy accept; }
}
",
        );
        let plan = hook_plan(&c.ruleset, &c.compiled).unwrap();
        let hooks: Vec<NfHook> = plan.chains.iter().map(|(h, _)| *h).collect();
        assert_eq!(hooks, [NfHook::Prerouting, NfHook::Postrouting]);
        assert!(plan
            .links
            .iter()
            .any(|w| w.hook == NfHook::Prerouting && w.priority == -150));
        let w = warnings(&c.ruleset, &c.compiled, None, true);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with(
                "f/b (priority 0) runs joined with f/a at priority -150 at PREROUTING"
            ) && w[0].contains("DNAT (priority -100)"),
            "{w:?}"
        );
    }

    #[test]
    fn the_tc_placement_warns_of_what_it_judges_differently() {
        let c = load(
            "*nat\n:PREROUTING ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n\
             -A PREROUTING -p udp --dport 7000 -j DNAT --to-destination 10.0.0.2:7001\n\
             -A POSTROUTING -o rh -j MASQUERADE\nCOMMIT\n\
             *filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n\
             -A FORWARD -m conntrack --ctstate DNAT -j ACCEPT\n\
             -A OUTPUT -p tcp --dport 25 -j REJECT --reject-with tcp-reset\nCOMMIT\n",
        );
        let w = tc_placement_warnings(&c.ruleset, &c.compiled);
        let has = |s: &str| w.iter().any(|x| x.contains(s));
        assert!(has("before DNAT"), "{w:?}");
        assert!(has("masquerade"), "{w:?}");
        assert!(has("conntrack status"), "{w:?}");
        // answered at tc egress too (into the interface's ingress)
        assert!(!has("REJECT"), "{w:?}");
        assert!(has("from a socket"), "{w:?}");
        // nothing to warn of without NAT, ct status and OUTPUT
        let c = load("*filter\n:INPUT DROP [0:0]\n-A INPUT -p tcp --dport 22 -j ACCEPT\nCOMMIT\n");
        assert!(tc_placement_warnings(&c.ruleset, &c.compiled).is_empty());
    }

    #[test]
    fn the_tc_placement_warns_of_ctstate_at_postrouting_after_snat() {
        let post = |rules: &str| {
            load(&format!(
                "table inet f {{\n chain post {{\n  type filter hook postrouting priority 300; \
                 policy accept;\n{rules} }}\n chain fwd {{\n  type filter hook forward \
                 priority 0; policy accept;\n  ct state established accept\n }}\n}}\n"
            ))
        };
        let c = post("  ct state new counter\n  udp dport 53 ct state established drop\n");
        let w = tc_placement_warnings(&c.ruleset, &c.compiled);
        let snat: Vec<&String> = w.iter().filter(|x| x.contains("after SNAT")).collect();
        assert_eq!(snat.len(), 1, "{w:?}");
        assert!(snat[0].contains("rules 1, 2 of f/post"), "{w:?}");
        // ctstate at FORWARD (tc ingress, before any NAT) is not this
        assert!(!snat[0].contains("fwd"), "{w:?}");
        let c = post("  udp dport 53 drop\n");
        let w = tc_placement_warnings(&c.ruleset, &c.compiled);
        assert!(!w.iter().any(|x| x.contains("after SNAT")), "{w:?}");
    }
}
