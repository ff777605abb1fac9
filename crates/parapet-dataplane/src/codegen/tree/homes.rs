//! Where the tree program keeps what it compares: the parsed fields in
//! registers (the most read) or their stack slots, the best entry so far
//! in a register; the exits that keep the stack's fields live for the
//! verifier, and the verdict dispatch after the last partition. The kernel's stack liveness pass (6.17+,
//! `bpf_update_live_stack`) reruns over the whole program at the end of
//! every path that read a slot where it was not yet known live or wrote
//! one at a new instruction: with the fields and the best entry on the
//! stack that was every leaf candidate, and the load grew with the square
//! of the program (docs/dataplane.md, "The tree form").

use super::super::asm::{Alu, Cond, Reg, Size, FP, R0, R1, R4, R5, R6, R7, R8, R9};
use super::super::parse::{Slot, XDP_DROP, XDP_PASS};
use super::super::rules::{jmp_const, load_unlinked, xdp_verdict};
use super::{Gen, ZERO};
use parapet_model::EntryKind;

/// Where the trees keep the parsed fields they compare most, instead of
/// their stack slots (r1–r3 are the comparisons' scratch registers).
pub(super) const FIELD_REGS: [Reg; 6] = [R4, R5, R6, R7, R8, R0];

/// The best entry so far.
pub(super) const BEST: Reg = R9;

/// Where the compared fields are kept from the trees on.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Homes {
    /// Per slot: its register, or `None`: its stack slot.
    pub(super) regs: [Option<Reg>; Slot::ALL.len()],
    /// The trees read fields left on the stack: their verdicts leave
    /// through exits that keep those slots live ([`Gen::exits`]).
    pub(super) guarded: bool,
}

impl Gen<'_> {
    /// Registers for the fields the trees read most (as counted by this
    /// generation), as many as [`FIELD_REGS`] holds; the rest stay on the
    /// stack, and when the trees read any of those, guarded exits.
    pub(super) fn homes_by_reads(&self) -> Homes {
        let mut by_reads: Vec<Slot> = Slot::ALL
            .into_iter()
            .filter(|&s| self.used.has(s))
            .collect();
        by_reads.sort_by_key(|&s| std::cmp::Reverse(self.reads[s as usize]));
        let mut homes = Homes::default();
        for (i, s) in by_reads.into_iter().enumerate() {
            match FIELD_REGS.get(i) {
                Some(&r) => homes.regs[s as usize] = Some(r),
                None => homes.guarded |= self.reads[s as usize] > 0,
            }
        }
        homes
    }

    /// `reg = the field in slot`, unlinked from where it is kept (see
    /// [`load_unlinked`]): a comparison narrows `reg` alone.
    pub(super) fn fetch(&mut self, reg: Reg, slot: Slot) {
        if !self.at_root {
            self.reads[slot as usize] += 1;
        }
        match self.homes.regs[slot as usize] {
            Some(home) => {
                self.a.alu_reg(Alu::Mov, reg, home);
                self.a.alu_imm(Alu::Or, reg, 0);
            }
            None => load_unlinked(&mut self.a, reg, slot),
        }
    }

    /// Ends the program with verdict `v` (an XDP return code): at once,
    /// or through its guarded exit.
    pub(super) fn verdict(&mut self, v: i32) {
        match (self.homes.guarded, v) {
            (false, _) => self.a.ret(v),
            (true, XDP_PASS) => self.a.ja_long(self.exit_pass),
            (true, _) => self.a.ja_long(self.exit_drop),
        }
    }

    /// With fields on the stack that the trees read: the exits every
    /// verdict of the trees leaves by, each with a branch never taken
    /// (the opaque zero is zero) to a read of every such field, for the
    /// verifier alone. The kernel's stack liveness pass (6.17+) reruns
    /// over the whole program at a path's end whenever the path read a
    /// slot at an instruction where the slot was not yet known live. The
    /// verifier's first path through the trees reaches an exit, the reads
    /// are walked next, and from then on every instruction of the trees
    /// (each one on a path to an exit) knows those slots live: a leaf's
    /// reads of them add nothing and the pass runs a few times, not once
    /// per leaf (docs/dataplane.md, "The tree form").
    pub(super) fn exits(&mut self) {
        if self.counted.is_some() {
            self.counted_exits();
            return;
        }
        if !self.homes.guarded {
            return;
        }
        let live = self.a.label();
        for (exit, v) in [(self.exit_pass, XDP_PASS), (self.exit_drop, XDP_DROP)] {
            let a = &mut self.a;
            a.bind(exit);
            a.load(Size::Dw, R1, FP, ZERO);
            a.alu_imm(Alu::Or, R1, 0);
            a.jmp_imm(Cond::Ne, R1, 0, live);
            a.ret(v);
        }
        self.a.bind(live);
        for &s in &self.spilled {
            self.a.load(Size::Dw, R1, FP, s.off());
        }
        self.a.ret(XDP_DROP);
    }

    /// The best entry so far := `entry`, opaque to the verifier. (The
    /// read of the zero's slot is live everywhere: the verdict dispatch
    /// reads it.)
    pub(super) fn set_best(&mut self, entry: u64) {
        if let Some(c) = &mut self.counted {
            c.best.insert(entry as usize);
        }
        let entry = i32::try_from(entry).expect("entry indexes fit an immediate");
        self.a.load(Size::Dw, BEST, FP, ZERO);
        self.a.alu_imm(Alu::Xor, BEST, entry);
    }

    /// To this partition's end unless the best entry so far is above
    /// `entry` (nothing to do when no earlier partition sets it).
    pub(super) fn skip_unless_best_above(&mut self, entry: u32) {
        if !self.earlier_sets {
            return;
        }
        let on = self.a.label();
        self.a.alu_reg(Alu::Mov, R1, BEST);
        self.a.alu_imm(Alu::Or, R1, 0);
        jmp_const(&mut self.a, Cond::Gt, R1, u64::from(entry), on);
        let done = self.done();
        self.a.ja_long(done);
        self.a.bind(on);
    }

    /// After the last partition: the verdict of the best entry (the
    /// policy's when none matched), by a binary search over the runs of
    /// equal verdicts.
    pub(super) fn verdict_dispatch(&mut self) {
        let policy = xdp_verdict(&self.list.policy).expect("eligible");
        if !self.any_set {
            self.decide(self.list.entries.len(), policy);
            return;
        }
        if self.counted.is_some() {
            self.counted_dispatch();
            return;
        }
        let mut runs: Vec<(u64, i32)> = Vec::new();
        let verdicts = self.list.entries.iter().map(|e| match &e.kind {
            EntryKind::Decide(v) => xdp_verdict(v).expect("eligible"),
            _ => unreachable!("pure first-match lists only"),
        });
        for (i, v) in verdicts.chain([policy]).enumerate() {
            if runs.last().map(|r| r.1) != Some(v) {
                runs.push((i as u64, v));
            }
        }
        // r1 = the best entry, unlinked; reading the zero here keeps its
        // slot live wherever `set_best` reads it
        self.a.load(Size::Dw, R1, FP, ZERO);
        self.a.alu_reg(Alu::Xor, R1, BEST);
        self.verdict_search(&runs);
    }

    fn verdict_search(&mut self, runs: &[(u64, i32)]) {
        if runs.len() == 1 {
            self.verdict(runs[0].1);
            return;
        }
        let mid = runs.len() / 2;
        let (below, above) = (self.a.label(), self.a.label());
        jmp_const(&mut self.a, Cond::Lt, R1, runs[mid].0, below);
        self.a.ja_long(above);
        self.a.bind(below);
        self.verdict_search(&runs[..mid]);
        self.a.bind(above);
        self.verdict_search(&runs[mid..]);
    }
}
