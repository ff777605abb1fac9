//! The generated program's rules: each decision-list entry as
//! compare-and-branch on the parsed fields' stack slots, a failed
//! comparison jumping to the next entry; a matching `Decide` returns its
//! verdict, a matching `Return` jumps to its resume entry, the policy
//! ends the list. What a decision list may hold to be generated at all is
//! [`ineligible`].

use parapet_model::{DecisionList, EntryKind, Field, IntervalSet, Verdict};

use super::asm::{Alu, Asm, Cond, Label, Reg, Size, FP, R0, R1, R2, R3};
use super::parse::{Slot, Used, XDP_DROP, XDP_PASS};

/// The most entries a generated program takes; longer lists stay with
/// the tree walker. Measured (docs/dataplane.md, "Generated programs"):
/// nf-HiPAC's worst case verifies at 1,024 entries (29,372 instructions,
/// 226,420 walked by the verifier) and fails at 4,096, where the verifier's
/// stack of branches still to explore passes its 8,192 (see
/// [`MAX_BRANCHES`]).
pub const MAX_ENTRIES: usize = 1024;

/// The most conditional jumps the rules may compile to. The verifier
/// follows one path first and keeps the other side of each undecided jump
/// on it for later, refusing a program with more than 8,192 pending; a
/// path meets each jump of the rules at most once (they only jump
/// forward), so this bound, with the parser's hundred-odd jumps, keeps
/// every program under that limit. nf-HiPAC's worst case takes eight per
/// rule: 1,000 rules.
pub const MAX_BRANCHES: usize = 8000;

/// The slots of a field the generated program compares: one, or the
/// high and low halves of an address.
pub(crate) fn slots(field: Field) -> Option<(Slot, Option<Slot>)> {
    Some(match field {
        Field::Family => (Slot::Family, None),
        Field::SrcAddr => (Slot::SrcHi, Some(Slot::SrcLo)),
        Field::DstAddr => (Slot::DstHi, Some(Slot::DstLo)),
        Field::Proto => (Slot::Proto, None),
        Field::SrcPort => (Slot::SrcPort, None),
        Field::DstPort => (Slot::DstPort, None),
        Field::IcmpTypeCode => (Slot::Icmp, None),
        Field::TcpFlags => (Slot::TcpFlags, None),
        Field::Fragment => (Slot::Fragment, None),
        Field::Ttl => (Slot::Ttl, None),
        Field::Dscp => (Slot::Dscp, None),
        Field::Length => (Slot::Length, None),
        _ => return None,
    })
}

pub(crate) fn xdp_verdict(v: &Verdict) -> Option<i32> {
    match v {
        Verdict::Accept => Some(XDP_PASS),
        Verdict::Drop => Some(XDP_DROP),
        Verdict::Reject { .. } => None,
    }
}

/// Why `list` cannot be a generated program, or `None` when it can: at
/// most [`MAX_ENTRIES`] entries; header fields only (family, addresses,
/// protocol, ports, ICMP type/code, TCP flags, fragment, TTL, DSCP,
/// length: no interfaces, sets, conntrack, marks, masked comparisons or
/// stateful conditions); ACCEPT and DROP (no REJECT, no LOG). Counter and
/// jump markers are kept as nothing: the program counts nothing.
pub fn ineligible(list: &DecisionList) -> Option<String> {
    if list.entries.len() > MAX_ENTRIES {
        return Some(format!(
            "{} entries, more than the {MAX_ENTRIES} a generated program takes",
            list.entries.len()
        ));
    }
    if let Some(why) = unsupported(list) {
        return Some(why);
    }
    // the rules compiled once to count their jumps, counters included
    let mut dry = Asm::default();
    let start = dry.label();
    emit_rules(&mut dry, list, start, Some(0));
    if dry.branches() > MAX_BRANCHES {
        return Some(format!(
            "{} comparisons, more than the {MAX_BRANCHES} a generated program takes",
            dry.branches()
        ));
    }
    None
}

/// What in `list` no generated program can do, whatever its size: a
/// field other than the header fields, a masked comparison, a stateful
/// condition, REJECT or LOG.
pub(crate) fn unsupported(list: &DecisionList) -> Option<String> {
    if xdp_verdict(&list.policy).is_none() {
        return Some("a REJECT policy".into());
    }
    for e in &list.entries {
        let id = e.rule_id;
        if e.is_stateful() {
            return Some(format!("rule {id} has a stateful condition"));
        }
        if e.matches.has_masked() {
            return Some(format!("rule {id} has a masked comparison"));
        }
        if e.matches.has_payload() {
            return Some(format!("rule {id} has a -m string match"));
        }
        if let Some((f, _)) = e.matches.iter().find(|(f, _)| slots(*f).is_none()) {
            return Some(format!("rule {id} matches on {f:?}"));
        }
        match &e.kind {
            EntryKind::Decide(v) if xdp_verdict(v).is_none() => {
                return Some(format!("rule {id} rejects"))
            }
            EntryKind::Log => return Some(format!("rule {id} logs")),
            _ => {}
        }
    }
    None
}

/// The slots the entries read (and the length, which counters add up).
pub(crate) fn used_slots(list: &DecisionList, counted: bool) -> Used {
    let mut used = Used::default();
    if counted {
        used.add(Slot::Length);
    }
    for e in &list.entries {
        for (f, _) in e.matches.iter() {
            if let Some((a, b)) = slots(*f) {
                used.add(a);
                if let Some(b) = b {
                    used.add(b);
                }
            }
        }
    }
    used
}

/// `if reg cond v goto to`, for any 64-bit `v` (r3 holds a constant the
/// immediate cannot).
pub(crate) fn jmp_const(a: &mut Asm, cond: Cond, reg: Reg, v: u64, to: Label) {
    if v <= i32::MAX as u64 {
        a.jmp_imm(cond, reg, v as i32, to);
    } else {
        a.mov_u64(R3, v);
        a.jmp_reg(cond, reg, R3, to);
    }
}

/// To `miss` unless `lo <= r1 <= hi` (64-bit values).
pub(crate) fn in_range64(a: &mut Asm, lo: u64, hi: u64, miss: Label) {
    if lo == hi {
        jmp_const(a, Cond::Ne, R1, lo, miss);
        return;
    }
    if lo > 0 {
        jmp_const(a, Cond::Lt, R1, lo, miss);
    }
    if hi < u64::MAX {
        jmp_const(a, Cond::Gt, R1, hi, miss);
    }
}

/// To `miss` unless `lo <= (r1 << 64 | r2) <= hi`.
pub(crate) fn in_range128(a: &mut Asm, lo: u128, hi: u128, miss: Label) {
    let (lh, ll, hh, hl) = ((lo >> 64) as u64, lo as u64, (hi >> 64) as u64, hi as u64);
    if lh == hh {
        // one high half (every IPv4 range): it, then the low half's range
        jmp_const(a, Cond::Ne, R1, lh, miss);
        a.alu_reg(Alu::Mov, R1, R2);
        in_range64(a, ll, hl, miss);
        return;
    }
    if lo > 0 {
        // r >= lo: above lo's high half, or equal to it and the low half
        let ok = a.label();
        jmp_const(a, Cond::Lt, R1, lh, miss);
        if ll > 0 {
            jmp_const(a, Cond::Gt, R1, lh, ok);
            jmp_const(a, Cond::Lt, R2, ll, miss);
        }
        a.bind(ok);
    }
    if hi < u128::MAX {
        let ok = a.label();
        jmp_const(a, Cond::Gt, R1, hh, miss);
        if hl < u64::MAX {
            jmp_const(a, Cond::Lt, R1, hh, ok);
            jmp_const(a, Cond::Gt, R2, hl, miss);
        }
        a.bind(ok);
    }
}

/// `reg = slot`, with the verifier's link between the two cut (`|= 0`
/// clears the register's scalar id): otherwise each comparison narrows
/// the slot's range for the rest of the path, later comparisons become
/// decided, their registers precise, and the verifier explores every
/// path through the rules separately (a 120-rule list exceeded its
/// million instructions).
pub(crate) fn load_unlinked(a: &mut Asm, reg: Reg, slot: Slot) {
    a.load(Size::Dw, reg, FP, slot.off());
    a.alu_imm(Alu::Or, reg, 0);
}

/// To `miss` unless the field's value is in `set`.
fn in_set(a: &mut Asm, field: Field, set: &IntervalSet, miss: Label) {
    let (first, second) = slots(field).expect("eligible fields only");
    let ranges = set.ranges();
    if ranges.is_empty() {
        a.ja(miss);
        return;
    }
    let hit = a.label();
    for (i, &(lo, hi)) in ranges.iter().enumerate() {
        let last = i + 1 == ranges.len();
        let next = if last { miss } else { a.label() };
        // reloaded for each range: in_range128 moves the low half into r1
        load_unlinked(a, R1, first);
        match second {
            Some(low) => {
                load_unlinked(a, R2, low);
                in_range128(a, lo, hi, next);
            }
            None => in_range64(a, lo as u64, hi.min(u64::MAX as u128) as u64, next),
        }
        if !last {
            a.ja(hit);
            a.bind(next);
        }
    }
    a.bind(hit);
}

/// Where the per-rule counter key is built on the stack: below the slots.
pub(crate) const COUNTER_KEY: i16 = -8 * (Slot::ALL.len() as i16 + 1);

/// `BPF_FUNC_map_lookup_elem`.
const MAP_LOOKUP_ELEM: i32 = 1;

/// Counts the packet (1, and its L3 length in bytes) in slot `idx` of the
/// per-CPU array behind `counters` (`{packets, bytes}` per entry, the
/// policy last). The lookup's key is a constant the verifier sees, so it
/// inlines the array lookup: no call at run time.
fn count(a: &mut Asm, counters: Option<i32>, idx: u32) {
    let Some(fd) = counters else { return };
    a.store_imm32(FP, COUNTER_KEY, idx as i32);
    count_keyed(a, fd);
}

/// `counters[key] += {1, the packet's L3 length}`, the key (a `u32`) at
/// [`COUNTER_KEY`] on the stack, in the per-CPU array `counters`
/// (clobbers r0–r5).
pub(crate) fn count_keyed(a: &mut Asm, fd: i32) {
    a.ld_map_fd(R1, fd);
    a.alu_reg(Alu::Mov, R2, FP);
    a.alu_imm(Alu::Add, R2, i32::from(COUNTER_KEY));
    a.call(MAP_LOOKUP_ELEM);
    let none = a.label();
    a.jmp_imm(Cond::Eq, R0, 0, none);
    a.load(Size::Dw, R1, R0, 0);
    a.alu_imm(Alu::Add, R1, 1);
    a.store(R0, 0, R1);
    a.load(Size::Dw, R1, R0, 8);
    a.load(Size::Dw, R2, FP, Slot::Length.off());
    a.alu_reg(Alu::Add, R1, R2);
    a.store(R0, 8, R1);
    a.bind(none);
}

/// Emits the entries and the policy, from `classify` (bound here); with
/// `counters` (a per-CPU array's fd), each matching entry that the walker
/// counts (decisions, counter and jump markers, counted RETURNs) and the
/// policy count the packet, entry `i` in slot `i`, the policy last.
pub(crate) fn emit_rules(a: &mut Asm, list: &DecisionList, classify: Label, counters: Option<i32>) {
    emit_rules_keyed(a, list, classify, counters, &|i| i as u32, None);
}

/// Where the rules' verdicts go instead of returning (pass, drop).
pub(crate) type VerdictExits = Option<(Label, Label)>;

/// [`emit_rules`], entry `i` counted in slot `key(i)` (the policy is
/// `key(entries)`), and with `exits` a decision jumps to the exit of its
/// verdict rather than returning: the attached program counts in the main
/// program's counters by rule id and its hook statistics at the exits
/// (`codegen/attached.rs`).
pub(crate) fn emit_rules_keyed(
    a: &mut Asm,
    list: &DecisionList,
    classify: Label,
    counters: Option<i32>,
    key: &dyn Fn(usize) -> u32,
    exits: VerdictExits,
) {
    let decide = |a: &mut Asm, v: &Verdict| {
        let v = xdp_verdict(v).expect("eligible verdicts only");
        match exits {
            // the exits follow the rules: further than a jump's offset
            // reaches in the longest lists
            Some((pass, _)) if v == XDP_PASS => a.ja_long(pass),
            Some((_, drop)) => a.ja_long(drop),
            None => a.ret(v),
        }
    };
    a.bind(classify);
    let labels: Vec<Label> = (0..=list.entries.len()).map(|_| a.label()).collect();
    for (i, e) in list.entries.iter().enumerate() {
        a.bind(labels[i]);
        let next = labels[i + 1];
        for (f, set) in e.matches.iter() {
            in_set(a, *f, set, next);
        }
        match &e.kind {
            EntryKind::Decide(v) => {
                count(a, counters, key(i));
                decide(a, v)
            }
            EntryKind::Return { resume, counted } => {
                if *counted {
                    count(a, counters, key(i));
                }
                let to = (*resume as usize).min(list.entries.len());
                a.ja(labels[to]);
            }
            EntryKind::Count | EntryKind::Jump | EntryKind::Log => count(a, counters, key(i)),
        }
    }
    a.bind(labels[list.entries.len()]);
    count(a, counters, key(list.entries.len()));
    decide(a, &list.policy);
}
