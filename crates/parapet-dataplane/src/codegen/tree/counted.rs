//! The tree program as parapetd attaches it: counting in the main
//! program's maps as the attached linear program does
//! (`codegen/attached.rs`, whose prologue and exits it reuses) — the
//! packets statistic, the XDP row of the hook statistics, and the decided
//! entry's rule in the per-rule counters under its rule id (the policy
//! under 0).
//!
//! For the verifier (docs/dataplane.md, "The tree form"): a decision does
//! not count where it is made; it leaves the rule id in r2, made opaque
//! (xor'ed with the best entry xor'ed with itself, a zero the verifier
//! cannot see is one), and jumps to its verdict's counted exit. Every decision
//! then reaches that exit in the same state, so the verifier walks the
//! counting once per exit rather than once per leaf, and nothing is
//! written to the stack in the trees (the stack liveness pass, `homes.rs`).

use std::collections::BTreeSet;
use std::os::fd::AsRawFd;

use parapet_image::Image;
use parapet_model::{DecisionList, EntryKind};

use super::super::asm::{Alu, Asm, Cond, Label, Size, FP, R1, R2, R3};
use super::super::attached::{count_packet, count_stat, exit_counted, Maps, STATS_ON};
use super::super::parse::{Exits, XDP_DROP, XDP_PASS};
use super::super::rules::{count_keyed, jmp_const, xdp_verdict, COUNTER_KEY};
use super::{generate_tree_on, Gen, TreeShape, BEST, ZERO};
use crate::error::Result;

/// The maps the attached tree program counts in (descriptors, valid while
/// the caller's [`Maps`] are) and its counted exits.
pub(super) struct Counted {
    counters: i32,
    stats: i32,
    hook_stats: i32,
    exit_pass: Label,
    exit_drop: Label,
    /// The entries a partition may leave as the best so far (the policy's
    /// index among them): the verdict dispatch's cases.
    pub(super) best: BTreeSet<usize>,
}

impl Counted {
    /// At the program's start: the packet counted as the attached linear
    /// program counts it (r1 the context again after it).
    pub(super) fn new(a: &mut Asm, maps: &Maps<'_>) -> Counted {
        count_packet(a, maps);
        Counted {
            counters: maps.counters.as_raw_fd(),
            stats: maps.stats.as_raw_fd(),
            hook_stats: maps.hook_stats.as_raw_fd(),
            exit_pass: a.label(),
            exit_drop: a.label(),
            best: BTreeSet::new(),
        }
    }
}

impl Counted {
    /// New exits for the next program of a split tree form.
    pub(super) fn fresh_exits(&mut self, a: &mut Asm) {
        self.exit_pass = a.label();
        self.exit_drop = a.label();
    }

    /// The exits (pass, drop) of the program being generated.
    pub(super) fn exits(&self) -> (Label, Label) {
        (self.exit_pass, self.exit_drop)
    }

    /// Back to a suspended program's exits.
    pub(super) fn set_exits(&mut self, (pass, drop): (Label, Label)) {
        self.exit_pass = pass;
        self.exit_drop = drop;
    }
}

impl Gen<'_> {
    fn counted(&self) -> &Counted {
        self.counted.as_ref().expect("the attached tree program")
    }

    /// With the zero in r2: the statistics switch (0 or 1) made opaque,
    /// so the verifier walks the trees once, not once per value.
    pub(super) fn opaque_stats_switch(&mut self) {
        self.a.load(Size::Dw, R3, FP, STATS_ON);
        self.a.alu_reg(Alu::Xor, R3, R2);
        self.a.store(FP, STATS_ON, R3);
    }

    /// The parser's own verdicts: returned, or in the attached program
    /// counted at the exits as the attached linear program counts them (a
    /// frame that is not IP also in `stats[Stat::NotIp]`).
    pub(super) fn parser_exits(&mut self, exits: &Exits) {
        let a = &mut self.a;
        let Some(c) = &self.counted else {
            a.bind(exits.drop);
            a.ret(XDP_DROP);
            a.bind(exits.pass);
            a.ret(XDP_PASS);
            return;
        };
        a.bind(exits.drop);
        exit_counted(a, c.hook_stats, XDP_DROP);
        a.bind(exits.pass);
        count_stat(a, c.stats, crate::abi::Stat::NotIp as u32);
        exit_counted(a, c.hook_stats, XDP_PASS);
    }

    /// Entry `entry` (the policy: the entries' count) decides with `v`:
    /// the program returns `v`, or in the attached program leaves by `v`'s
    /// counted exit with the entry's rule id (the policy's 0) in r2.
    pub(super) fn decide(&mut self, entry: usize, v: i32) {
        let Some(c) = &self.counted else {
            self.verdict(v);
            return;
        };
        let exit = if v == XDP_PASS {
            c.exit_pass
        } else {
            c.exit_drop
        };
        let key = self.list.entries.get(entry).map_or(0, |e| e.rule_id);
        // zero, opaque, from the best entry (opaque) rather than the
        // zero's slot: a read of the stack here would be a read at a new
        // instruction per leaf, one rerun of the stack liveness pass each
        self.a.alu_reg(Alu::Mov, R2, BEST);
        self.a.alu_reg(Alu::Xor, R2, BEST);
        self.a.alu_imm(Alu::Xor, R2, key as i32);
        self.a.ja_long(exit);
    }

    /// The attached program's verdict dispatch: by a binary search over
    /// the entries a partition may leave as the best, each deciding
    /// ([`Gen::decide`]) with its rule id.
    pub(super) fn counted_dispatch(&mut self) {
        let cases: Vec<usize> = self.counted().best.iter().copied().collect();
        self.a.load(Size::Dw, R1, FP, ZERO);
        self.a.alu_reg(Alu::Xor, R1, BEST);
        self.best_search(&cases);
    }

    fn best_search(&mut self, cases: &[usize]) {
        if let [entry] = cases {
            let v = match self.list.entries.get(*entry).map(|e| &e.kind) {
                Some(EntryKind::Decide(v)) => xdp_verdict(v),
                Some(_) => unreachable!("pure first-match lists only"),
                None => xdp_verdict(&self.list.policy),
            };
            self.decide(*entry, v.expect("eligible"));
            return;
        }
        let mid = cases.len() / 2;
        let (below, above) = (self.a.label(), self.a.label());
        jmp_const(&mut self.a, Cond::Lt, R1, cases[mid] as u64, below);
        self.a.ja_long(above);
        self.a.bind(below);
        self.best_search(&cases[..mid]);
        self.a.bind(above);
        self.best_search(&cases[mid..]);
    }

    /// The counted exits: the rule id in r2 counted in the per-rule
    /// counters, then the hook statistics and the verdict
    /// ([`exit_counted`]). With fields on the stack that the trees read,
    /// each first has the never-taken branch to reads of them that
    /// [`Gen::exits`] explains.
    pub(super) fn counted_exits(&mut self) {
        let c = self.counted();
        let (counters, hook_stats) = (c.counters, c.hook_stats);
        let exits = [(c.exit_pass, XDP_PASS), (c.exit_drop, XDP_DROP)];
        let live = self.a.label();
        for (exit, v) in exits {
            let a = &mut self.a;
            a.bind(exit);
            if self.homes.guarded {
                a.load(Size::Dw, R1, FP, ZERO);
                a.alu_imm(Alu::Or, R1, 0);
                a.jmp_imm(Cond::Ne, R1, 0, live);
            }
            a.store(FP, COUNTER_KEY, R2);
            count_keyed(a, counters);
            exit_counted(a, hook_stats, v);
        }
        if self.homes.guarded {
            self.a.bind(live);
            for &s in &self.spilled {
                self.a.load(Size::Dw, R1, FP, s.off());
            }
            self.a.ret(XDP_DROP);
        }
    }
}

/// `list`'s tree program from its compiled `image` as parapetd attaches
/// it, counting in `maps` (the main program's), and its shape.
pub fn generate_tree_attached(
    list: &DecisionList,
    image: &Image,
    maps: &Maps<'_>,
) -> Result<(Vec<[u8; 8]>, TreeShape)> {
    generate_tree_on(list, image, Some(maps))
}
