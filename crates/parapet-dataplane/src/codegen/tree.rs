//! The compiled decision tree as code: the image's trees (one per
//! partition, `docs/image-format.md`) emitted as compare-and-branch — a
//! binary node one comparison of its field with the cut, a multi-way node
//! its child index computed as the walker computes it and a binary search
//! over the children — and each leaf's candidates as the linear program's
//! checks, with the comparisons the path down already decided left out;
//! what every entry of a partition compares is checked once at its root
//! and left out below. The partitions' first matches are merged by the
//! smallest entry index, as the walker's fast path merges them. Only pure
//! first-match lists (ACCEPT and DROP entries) of the header fields the
//! parser reads.
//!
//! For the verifier (docs/dataplane.md, "Generated programs", "The tree
//! form"): every value the rules compare is made opaque once parsed (xor
//! with a zero the verifier cannot see is zero, from two loads of the
//! ingress ifindex), and so is the best match so far; every path then
//! reaches each partition's end and the verdict dispatch in the same
//! state, so the verifier walks each instruction about once, and no path
//! meets more than the tree's depth and a few leaves' jumps. The fields
//! are kept in registers where they fit and nothing is written to the
//! stack after the parser (`tree/homes.rs`), so the kernel's stack
//! liveness pass runs a few times per load, not once per leaf.

use parapet_image::{self as image, hw, u128_at, Image};
use parapet_model::{DecisionList, EntryKind, Field};

use super::asm::{Alu, Asm, Cond, Label, Size, FP, R1, R2, R3};
use super::attached::Maps;
use super::parse::{self, Exits, Slot, Used};
use super::rules::{
    in_range128, in_range64, jmp_const, slots, unsupported, used_slots, xdp_verdict,
};
use super::GeneratedXdp;
use counted::Counted;
use homes::{Homes, BEST};
use split::Split;

mod counted;
mod homes;
mod split;
use crate::error::{Error, Result};
pub use counted::generate_tree_attached;
pub use split::{load_tree_attached, load_tree_attached_within};
pub use split::{TreeProgram, MAX_TREE_PROGRAMS, MAX_TREE_TOTAL_INSNS, TREE_PROGRAM_BUDGET};

/// The most instructions the kernel loads in one program
/// (`BPF_COMPLEXITY_LIMIT_INSNS`, also the verifier's budget of
/// instructions walked).
pub const MAX_TREE_INSNS: usize = 1_000_000;

/// The tree form's stack slot, below the parser's slots, the linear
/// program's counter key and the attached program's slots: the opaque
/// zero.
const ZERO: i16 = super::attached::IFINDEX - 8;

/// `xdp_md.ingress_ifindex`.
const XDP_MD_INGRESS_IFINDEX: i16 = 12;

/// What a tree program is made of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TreeShape {
    /// Instructions.
    pub insns: usize,
    /// Partitions (trees) with entries.
    pub partitions: usize,
    /// Internal nodes emitted.
    pub nodes: usize,
    /// Leaves emitted.
    pub leaves: usize,
    /// Candidate checks emitted (one per entry per leaf holding it).
    pub checks: usize,
    /// Candidates left out: the leaf's region holds no packet they match.
    pub elided: usize,
    /// Field comparisons left out: the leaf's region lies within them.
    pub implied: usize,
    /// Field comparisons made once at a partition's root because every
    /// entry of the partition makes them (a packet outside them matches
    /// none), then left out of the leaves.
    pub common: usize,
    /// Compared fields kept in registers through the trees.
    pub in_registers: usize,
    /// Compared fields left in their stack slots (more than the registers
    /// hold).
    pub on_stack: usize,
    /// The trees read fields on the stack, and their verdicts leave
    /// through exits that keep those slots live for the verifier.
    pub guarded_exits: bool,
    /// Programs: 1, or more when the trees are split over programs
    /// entered by tail calls (`tree/split.rs`); `insns` counts them all.
    pub programs: usize,
    /// Instructions of the largest program.
    pub largest: usize,
}

/// Per fixed field (ids of [`Field::FIXED`]): the values a packet at this
/// point of the tree can have.
type Region = [(u128, u128); Field::FIXED.len()];

fn whole_space() -> Region {
    std::array::from_fn(|f| (0, Field::FIXED[f].max_value()))
}

fn field_id(f: Field) -> usize {
    Field::FIXED
        .iter()
        .position(|&x| x == f)
        .expect("eligible fields are fixed fields")
}

/// Why `list` with its compiled `image` cannot be a tree program, or
/// `None` when it can (the size is known only once generated: see
/// [`MAX_TREE_INSNS`]).
pub fn tree_ineligible(list: &DecisionList, image: &Image) -> Option<String> {
    if let Some(why) = unsupported(list) {
        return Some(why);
    }
    if !list.is_pure_first_match() {
        return Some("not pure first-match (RETURN, counter, jump or LOG entries)".into());
    }
    let w = image.words();
    if w[hw::N_ENTRIES] as usize != list.entries.len() {
        return Some("the image is not this list's".into());
    }
    let (nodes_off, n_nodes) = (w[hw::NODES_OFF] as usize, w[hw::N_NODES] as usize);
    for i in 0..n_nodes {
        let fid = (w[nodes_off + i * image::NODE_WORDS] & 0xff) as usize;
        match Field::FIXED.get(fid) {
            Some(&f) if slots(f).is_some() => {}
            _ => return Some(format!("the tree cuts on field id {fid}")),
        }
    }
    None
}

/// `list`'s tree program from its compiled `image` (the compiler's trees,
/// `parapet_compile::compile`), and its shape.
pub fn generate_tree(list: &DecisionList, image: &Image) -> Result<(Vec<[u8; 8]>, TreeShape)> {
    generate_tree_on(list, image, None)
}

/// [`generate_tree`], and with `maps` counting in them as the attached
/// linear program does (`tree/counted.rs`).
fn generate_tree_on(
    list: &DecisionList,
    image: &Image,
    maps: Option<&Maps<'_>>,
) -> Result<(Vec<[u8; 8]>, TreeShape)> {
    if let Some(why) = tree_ineligible(list, image) {
        return Err(Error::Codegen(format!(
            "not eligible for the tree form: {why}"
        )));
    }
    // first with every field on the stack, to count the trees' reads of
    // each; then the most read in registers
    let dry = emit(list, image, Homes::default(), maps, None, MAX_TREE_INSNS)?;
    let g = emit(
        list,
        image,
        dry.homes_by_reads(),
        maps,
        None,
        MAX_TREE_INSNS,
    )?;
    one_program(g)
}

/// The program `g` generated, assembled, and its shape.
fn one_program(g: Gen<'_>) -> Result<(Vec<[u8; 8]>, TreeShape)> {
    let prog =
        g.a.finish()
            .map_err(|e| Error::Codegen(format!("assembling: {e:?}")))?;
    let mut shape = g.shape;
    shape.insns = prog.len();
    shape.programs = 1;
    shape.largest = prog.len();
    if prog.len() > MAX_TREE_INSNS {
        return Err(Error::Codegen(format!(
            "{} instructions, more than the {MAX_TREE_INSNS} the kernel loads",
            prog.len()
        )));
    }
    Ok((prog, shape))
}

/// The program with the fields kept in `homes`, unassembled: one, or
/// with `split` the programs it plans (the last in `a`, the others in the
/// split); more than `limit` instructions is an error.
fn emit<'a>(
    list: &'a DecisionList,
    image: &'a Image,
    homes: Homes,
    maps: Option<&Maps<'_>>,
    split: Option<Split>,
    limit: usize,
) -> Result<Gen<'a>> {
    let w = image.words();
    let mut a = Asm::default();
    let (exit_pass, exit_drop) = (a.label(), a.label());
    let mut g = Gen {
        a,
        list,
        w,
        nodes_off: w[hw::NODES_OFF] as usize,
        fanout_off: w[hw::FANOUT_OFF] as usize,
        leaves_off: w[hw::LEAVES_OFF] as usize,
        earlier_sets: false,
        any_set: false,
        min_later: u32::MAX,
        done: None,
        homes,
        spilled: Vec::new(),
        reads: [0; Slot::ALL.len()],
        at_root: false,
        exit_pass,
        exit_drop,
        used: Used::default(),
        counted: None,
        shape: TreeShape::default(),
        split,
        sizes: Vec::new(),
        header: 0,
        limit,
        occs: Vec::new(),
        cur_occ: None,
    };
    if g.split.is_some() {
        // for the tail calls
        g.a.store(FP, split::CTX, R1);
    }
    if let Some(maps) = maps {
        g.counted = Some(Counted::new(&mut g.a, maps));
    }
    let a = &mut g.a;
    let exits = Exits {
        classify: a.label(),
        drop: a.label(),
        pass: a.label(),
    };
    store_opaque_zero(a);
    if g.counted.is_some() {
        g.opaque_stats_switch();
    }
    let used = g.used_slots();
    g.used = used;
    let a = &mut g.a;
    parse::emit_parser(a, used, &exits);
    g.parser_exits(&exits);
    g.a.bind(exits.classify);
    if g.split.is_some() {
        g.save_state();
    }
    g.load_fields(true);
    g.set_best(list.entries.len() as u64);
    g.header = g.a.len();
    let n_parts = w[hw::N_PARTITIONS] as usize;
    let part = |p: usize| &w[w[hw::PARTITIONS_OFF] as usize + p * image::PARTITION_WORDS..][..4];
    for p in 0..n_parts {
        let (root, min_entry) = (part(p)[0], part(p)[3]);
        if min_entry == u32::MAX {
            continue;
        }
        g.shape.partitions += 1;
        if g.split.as_ref().is_some_and(|s| s.starts_at(p)) {
            g.next_program()?;
        }
        let before = g.a.len();
        g.min_later = (p + 1..n_parts)
            .map(|q| part(q)[3])
            .min()
            .unwrap_or(u32::MAX);
        g.earlier_sets = g.any_set;
        let done = g.a.label();
        g.done = Some(done);
        // nothing here can beat an earlier partition's match below it
        g.skip_unless_best_above(min_entry);
        let region = g.common_checks(root);
        let root_occ = g.occs.len();
        g.emit_ref(root, &region, 0)?;
        g.a.bind(done);
        g.sizes.push(PartSize {
            part: p,
            size: g.a.len() - before,
            root: root_occ,
        });
    }
    if g.split.as_ref().is_some_and(|s| s.starts_at(n_parts)) {
        g.next_program()?;
    }
    g.verdict_dispatch();
    if let Some(current) = g.split.as_ref().map(|s| s.current) {
        g.call_blocks(current);
    }
    g.exits();
    g.shape.guarded_exits = g.homes.guarded;
    Ok(g)
}

/// With the context in r1: the zero the verifier cannot see is one (the
/// ingress ifindex, read twice, xor'ed, spread over 64 bits) in r2 and
/// its stack slot.
fn store_opaque_zero(a: &mut Asm) {
    a.load(Size::W, R2, R1, XDP_MD_INGRESS_IFINDEX);
    a.load(Size::W, R3, R1, XDP_MD_INGRESS_IFINDEX);
    a.alu_reg(Alu::Xor, R2, R3);
    a.alu_reg(Alu::Mov, R3, R2);
    a.alu_imm(Alu::Lsh, R3, 32);
    a.alu_reg(Alu::Or, R2, R3);
    a.store(FP, ZERO, R2);
}

impl GeneratedXdp {
    /// `list`'s tree program (see [`generate_tree`]) loaded, with its
    /// shape; no counters. Split over programs when it is larger than
    /// one holds ([`TREE_PROGRAM_BUDGET`], `tree/split.rs`).
    pub fn load_tree(list: &DecisionList, image: &Image) -> Result<(GeneratedXdp, TreeShape)> {
        let (prog, shape) = split::load_tree_on(
            list,
            image,
            None,
            super::GENERATED_PROG_NAME,
            TREE_PROGRAM_BUDGET,
        )?;
        let loaded = GeneratedXdp {
            fd: prog.entry,
            insns: shape.insns,
            counters: None,
            entries: list.entries.len(),
            _prog_array: prog.prog_array,
        };
        Ok((loaded, shape))
    }
}

struct Gen<'a> {
    a: Asm,
    list: &'a DecisionList,
    w: &'a [u32],
    nodes_off: usize,
    fanout_off: usize,
    leaves_off: usize,
    /// An earlier partition may have set the best entry.
    earlier_sets: bool,
    /// Some partition so far sets it.
    any_set: bool,
    /// The smallest entry of the partitions after this one: a match below
    /// it decides.
    min_later: u32,
    /// This partition's end.
    done: Option<Label>,
    /// Where the fields are kept.
    homes: Homes,
    /// The compared fields left in their stack slots.
    spilled: Vec<Slot>,
    /// Per slot: the trees' reads of it (the common checks at the roots
    /// not counted: a few per partition).
    reads: [usize; Slot::ALL.len()],
    /// Emitting a root's common checks.
    at_root: bool,
    /// The guarded exits (with [`Homes::guarded`]).
    exit_pass: Label,
    exit_drop: Label,
    /// The slots the parser fills.
    used: Used,
    /// Counting in the main program's maps (the attached tree program).
    counted: Option<Counted>,
    shape: TreeShape,
    /// The trees split over programs (`tree/split.rs`).
    split: Option<Split>,
    /// Per partition emitted: its index, instructions and root occurrence.
    sizes: Vec<PartSize>,
    /// The instructions before the first partition.
    header: usize,
    /// The most instructions the generation may emit (all programs).
    limit: usize,
    /// Every [`Gen::emit_ref`] so far, in emission order.
    occs: Vec<Occ>,
    /// The occurrence being emitted.
    cur_occ: Option<usize>,
}

/// A partition as emitted.
#[derive(Clone, Copy, Debug)]
struct PartSize {
    part: usize,
    size: usize,
    /// Its tree's root occurrence ([`Occ`]).
    root: usize,
}

/// One [`Gen::emit_ref`]: the occurrence it was called from (`None`: a
/// partition's root) and the instructions it emitted.
#[derive(Clone, Copy, Debug)]
struct Occ {
    parent: Option<usize>,
    size: usize,
}

impl Gen<'_> {
    /// The entries' slots and the slots of the fields the trees cut.
    fn used_slots(&self) -> Used {
        let mut used = used_slots(self.list, self.counted.is_some());
        let n_nodes = self.w[hw::N_NODES] as usize;
        for i in 0..n_nodes {
            let fid = (self.w[self.nodes_off + i * image::NODE_WORDS] & 0xff) as usize;
            let (a, b) = slots(Field::FIXED[fid]).expect("eligible");
            used.add(a);
            if let Some(b) = b {
                used.add(b);
            }
        }
        used
    }

    /// The entries in the leaves under child ref `r`, ascending.
    fn entries_under(&self, r: u32) -> Vec<u32> {
        let (mut seen, mut todo, mut out) = (std::collections::HashSet::new(), vec![r], Vec::new());
        while let Some(r) = todo.pop() {
            if !seen.insert(r) {
                continue;
            }
            if r & image::LEAF_BIT != 0 {
                let at = self.leaves_off + (r & !image::LEAF_BIT) as usize;
                out.extend_from_slice(&self.w[at + 1..at + 1 + self.w[at] as usize]);
                continue;
            }
            let n = &self.w[self.nodes_off + r as usize * image::NODE_WORDS..][..4];
            if n[0] >> 8 == image::NODE_BINARY {
                todo.extend([n[1], n[2]]);
            } else {
                let (off, bits) = (n[1] as usize, n[2] & 0xff);
                todo.extend_from_slice(&self.w[self.fanout_off + off..][..1 << bits]);
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// At the root of the tree `root`: per field that every entry of the
    /// tree compares, one check that the packet lies within the hull of
    /// their ranges (to the partition's end if not: it matches none of
    /// them), and the region the tree's code then starts from. Where the
    /// entries share a constraint (nf-HiPAC's worst case: one source, one
    /// destination, one protocol and source port for all rules) each
    /// leaf's candidates then find it implied, and the program shrinks to
    /// its tree.
    fn common_checks(&mut self, root: u32) -> Region {
        let mut region = whole_space();
        let entries = self.entries_under(root);
        if entries.is_empty() {
            return region;
        }
        self.at_root = true;
        // a failed check leaves by a long jump (the tree lies between)
        let (out, tree) = (self.a.label(), self.a.label());
        for (fid, &field) in Field::FIXED.iter().enumerate() {
            let mut hull: Option<(u128, u128)> = None;
            for &e in &entries {
                let Some(set) = self.list.entries[e as usize].matches.get(field) else {
                    hull = None;
                    break;
                };
                let (Some(first), Some(last)) = (set.ranges().first(), set.ranges().last()) else {
                    // matches no packet: constrains nothing here
                    continue;
                };
                let (lo, hi) = hull.unwrap_or((first.0, last.1));
                hull = Some((lo.min(first.0), hi.max(last.1)));
            }
            let Some((lo, hi)) = hull else { continue };
            let (rlo, rhi) = region[fid];
            if lo <= rlo && hi >= rhi {
                continue;
            }
            self.shape.common += 1;
            let bounds = ((lo > rlo).then_some(lo), (hi < rhi).then_some(hi));
            self.in_ranges(fid, &[bounds], &region, out);
            region[fid] = (lo.max(rlo), hi.min(rhi));
        }
        self.at_root = false;
        let done = self.done();
        self.a.ja(tree);
        self.a.bind(out);
        self.a.ja_long(done);
        self.a.bind(tree);
        region
    }

    fn done(&self) -> Label {
        self.done.expect("inside a partition")
    }

    /// At the trees' start (after the parser, or a continuation's
    /// prologue): the compared fields, opaque, into their registers or
    /// back into their slots; `first`: the first time (counted in the
    /// shape).
    fn load_fields(&mut self, first: bool) {
        // every parser path on: the same opaque values from here
        self.a.load(Size::Dw, R1, FP, ZERO);
        for s in Slot::ALL.into_iter().filter(|&s| self.used.has(s)) {
            let a = &mut self.a;
            match self.homes.regs[s as usize] {
                Some(r) => {
                    a.load(Size::Dw, r, FP, s.off());
                    a.alu_reg(Alu::Xor, r, R1);
                    self.shape.in_registers += usize::from(first);
                }
                None => {
                    a.load(Size::Dw, R2, FP, s.off());
                    a.alu_reg(Alu::Xor, R2, R1);
                    a.store(FP, s.off(), R2);
                    if first {
                        self.spilled.push(s);
                        self.shape.on_stack += 1;
                    }
                }
            }
        }
    }

    /// The subtree at child ref `r`, whose packets lie in `region`: here,
    /// or in a program of its own when the split says so (each call is an
    /// occurrence, numbered in emission order, its size noted for the
    /// split's plan).
    fn emit_ref(&mut self, r: u32, region: &Region, depth: usize) -> Result<()> {
        if self.a.len() + self.split.as_ref().map_or(0, Split::emitted) > self.limit {
            return Err(Error::Codegen(format!(
                "more than {} instructions: over the tree form's budget",
                self.limit
            )));
        }
        let occ = self.occs.len();
        self.occs.push(Occ {
            parent: self.cur_occ,
            size: 0,
        });
        let parent = self.cur_occ.replace(occ);
        let start = self.a.len();
        let done = if self.split.as_ref().is_some_and(|s| s.extracts(occ)) {
            self.extracted(occ, r, region, depth)
        } else {
            self.emit_node(r, region, depth)
        };
        self.occs[occ].size = self.a.len().saturating_sub(start);
        self.cur_occ = parent;
        done
    }

    /// [`Gen::emit_ref`]'s node or leaf, here.
    fn emit_node(&mut self, r: u32, region: &Region, depth: usize) -> Result<()> {
        if depth > image::MAX_DEPTH {
            return Err(Error::Codegen(
                "a tree deeper than the format allows".into(),
            ));
        }
        if r & image::LEAF_BIT != 0 {
            self.leaf(self.leaves_off + (r & !image::LEAF_BIT) as usize, region);
            return Ok(());
        }
        let n: [u32; 8] = self.w[self.nodes_off + r as usize * image::NODE_WORDS..][..8]
            .try_into()
            .expect("8 words");
        let fid = (n[0] & 0xff) as usize;
        self.shape.nodes += 1;
        if n[0] >> 8 == image::NODE_BINARY {
            self.binary(&n, fid, region, depth)
        } else {
            self.multi_way(&n, fid, region, depth)
        }
    }

    /// Left when the field is at most the cut, right otherwise.
    fn binary(&mut self, n: &[u32; 8], fid: usize, region: &Region, depth: usize) -> Result<()> {
        let cut = u128_at(&n[4..8]);
        let (lo, hi) = region[fid];
        if cut >= hi {
            return self.emit_ref(n[1], region, depth + 1);
        }
        if cut < lo {
            return self.emit_ref(n[2], region, depth + 1);
        }
        let (left, right) = (self.a.label(), self.a.label());
        let (first, second) = slots(Field::FIXED[fid]).expect("eligible");
        match second {
            None => {
                self.fetch(R1, first);
                jmp_const(&mut self.a, Cond::Lt, R1, cut as u64 + 1, left);
            }
            // the high half fixed by the path: the low halves decide
            Some(low) if lo >> 64 == hi >> 64 => {
                self.fetch(R1, low);
                jmp_const(&mut self.a, Cond::Lt, R1, cut as u64 + 1, left);
            }
            Some(low) => {
                let (ch, cl) = ((cut >> 64) as u64, cut as u64);
                self.fetch(R1, first);
                self.fetch(R2, low);
                let a = &mut self.a;
                if ch > 0 {
                    jmp_const(a, Cond::Lt, R1, ch, left);
                }
                let above = a.label();
                jmp_const(a, Cond::Gt, R1, ch, above);
                match cl.checked_add(1) {
                    Some(c) => jmp_const(a, Cond::Lt, R2, c, left),
                    None => a.ja(left),
                }
                a.bind(above);
            }
        }
        let a = &mut self.a;
        a.ja_long(right);
        a.bind(left);
        let mut sub = *region;
        sub[fid].1 = cut;
        self.emit_ref(n[1], &sub, depth + 1)?;
        self.a.bind(right);
        let mut sub = *region;
        sub[fid].0 = cut + 1;
        self.emit_ref(n[2], &sub, depth + 1)
    }

    /// `idx = min(((low word - lo) mod 2^32) >> shift, 2^bits - 1)`, as the
    /// walker computes it, then a binary search over the runs of equal
    /// children, then each distinct child.
    fn multi_way(&mut self, n: &[u32; 8], fid: usize, region: &Region, depth: usize) -> Result<()> {
        let (off, bits, shift, base) = (n[1] as usize, n[2] & 0xff, (n[2] >> 8) & 0xff, n[3]);
        let count = 1usize << bits;
        let children = &self.w[self.fanout_off + off..][..count];
        // runs of equal children: (first index, child)
        let mut runs: Vec<(usize, u32)> = Vec::new();
        for (i, &c) in children.iter().enumerate() {
            if runs.last().map(|r| r.1) != Some(c) {
                runs.push((i, c));
            }
        }
        let (first, second) = slots(Field::FIXED[fid]).expect("eligible");
        self.fetch(R1, second.unwrap_or(first));
        let a = &mut self.a;
        if base != 0 {
            a.mov_u64(R3, u64::from(base));
            a.alu_reg(Alu::Sub, R1, R3);
        }
        a.alu_imm(Alu::Lsh, R1, 32);
        a.alu_imm(Alu::Rsh, R1, 32 + shift as i32);
        // one label per distinct child, its region the hull of its runs
        let mut distinct: Vec<(u32, Label, usize, usize)> = Vec::new();
        let mut targets = Vec::with_capacity(runs.len());
        for (k, &(start, child)) in runs.iter().enumerate() {
            let end = runs.get(k + 1).map_or(count - 1, |r| r.0 - 1);
            match distinct.iter_mut().find(|d| d.0 == child) {
                Some(d) => {
                    d.3 = end;
                    targets.push(d.1);
                }
                None => {
                    let l = self.a.label();
                    distinct.push((child, l, start, end));
                    targets.push(l);
                }
            }
        }
        let starts: Vec<usize> = runs.iter().map(|r| r.0).collect();
        self.index_search(&starts, &targets);
        let (lo, hi) = region[fid];
        // the compiler's region, as this walk tracks it: narrow to the
        // child's slice (otherwise keep the node's region, which holds it)
        let narrow = hi - lo < 1 << 32 && lo as u32 == base;
        for (child, label, i0, i1) in distinct {
            self.a.bind(label);
            let mut sub = *region;
            if narrow {
                let s_lo = lo + ((i0 as u128) << shift);
                let s_hi = match i1 + 1 == count {
                    true => hi,
                    false => hi.min(lo + (((i1 + 1) as u128) << shift) - 1),
                };
                if s_lo <= s_hi {
                    sub[fid] = (s_lo, s_hi);
                }
            }
            self.emit_ref(child, &sub, depth + 1)?;
        }
        Ok(())
    }

    /// With the child index in r1: to `targets[k]` for the run `k` whose
    /// first index `starts[k]` is the largest at most r1.
    fn index_search(&mut self, starts: &[usize], targets: &[Label]) {
        if starts.len() == 1 {
            self.a.ja_long(targets[0]);
            return;
        }
        let mid = starts.len() / 2;
        let below = self.a.label();
        self.a.jmp_imm(Cond::Lt, R1, starts[mid] as i32, below);
        self.index_search(&starts[mid..], &targets[mid..]);
        self.a.bind(below);
        self.index_search(&starts[..mid], &targets[..mid]);
    }

    /// A leaf at word `at` of the image: its candidates in entry order,
    /// the first match ending the partition.
    fn leaf(&mut self, at: usize, region: &Region) {
        self.shape.leaves += 1;
        let count = self.w[at] as usize;
        let cands: Vec<u32> = self.w[at + 1..at + 1 + count].to_vec();
        let done = self.done();
        let Some(&first) = cands.first() else {
            self.a.ja_long(done);
            return;
        };
        self.skip_unless_best_above(first);
        for c in cands {
            let Some(plan) = self.plan(c as usize, region) else {
                self.shape.elided += 1;
                continue;
            };
            self.shape.checks += 1;
            let next = self.a.label();
            for (fid, ranges) in plan {
                self.in_ranges(fid, &ranges, region, next);
            }
            // matched: it wins unless an earlier partition's match is below
            self.skip_unless_best_above(c);
            let EntryKind::Decide(v) = &self.list.entries[c as usize].kind else {
                unreachable!("pure first-match lists only");
            };
            if c < self.min_later {
                self.decide(c as usize, xdp_verdict(v).expect("eligible"));
            } else {
                self.set_best(u64::from(c));
                self.any_set = true;
                self.a.ja_long(done);
            }
            self.a.bind(next);
        }
        self.a.ja_long(done);
    }

    /// The comparisons entry `c` needs in `region`: per field id, its
    /// ranges that meet the region, an end left `None` where the region
    /// already lies beyond it; `None` when the entry matches no packet of
    /// the region.
    fn plan(&mut self, c: usize, region: &Region) -> Option<Vec<(usize, Vec<Bounds>)>> {
        let mut plan = Vec::new();
        for (f, set) in self.list.entries[c].matches.iter() {
            let fid = field_id(*f);
            let (lo, hi) = region[fid];
            let meet: Vec<(u128, u128)> = set
                .ranges()
                .iter()
                .copied()
                .filter(|&(a, b)| a <= hi && b >= lo)
                .collect();
            if meet.is_empty() {
                return None;
            }
            if meet.iter().any(|&(a, b)| a <= lo && b >= hi) {
                self.shape.implied += 1;
                continue;
            }
            let bounds = meet
                .into_iter()
                .map(|(a, b)| ((a > lo).then_some(a), (b < hi).then_some(b)))
                .collect();
            plan.push((fid, bounds));
        }
        Some(plan)
    }

    /// To `miss` unless field `fid` lies in one of `ranges`.
    fn in_ranges(&mut self, fid: usize, ranges: &[Bounds], region: &Region, miss: Label) {
        let (first, second) = slots(Field::FIXED[fid]).expect("eligible");
        let (lo, hi) = region[fid];
        let hit = self.a.label();
        for (i, &(rlo, rhi)) in ranges.iter().enumerate() {
            let last = i + 1 == ranges.len();
            let next = if last { miss } else { self.a.label() };
            match second {
                None => {
                    self.fetch(R1, first);
                    let (l, h) = (rlo.unwrap_or(0) as u64, rhi.map_or(u64::MAX, |h| h as u64));
                    in_range64(&mut self.a, l, h, next);
                }
                // the high half fixed by the path: the low halves decide
                Some(low) if lo >> 64 == hi >> 64 => {
                    self.fetch(R1, low);
                    let (l, h) = (
                        rlo.map_or(0, |l| l as u64),
                        rhi.map_or(u64::MAX, |h| h as u64),
                    );
                    in_range64(&mut self.a, l, h, next);
                }
                Some(low) => {
                    self.fetch(R1, first);
                    self.fetch(R2, low);
                    let (l, h) = (rlo.unwrap_or(0), rhi.unwrap_or(u128::MAX));
                    in_range128(&mut self.a, l, h, next);
                }
            }
            if !last {
                self.a.ja(hit);
                self.a.bind(next);
            }
        }
        self.a.bind(hit);
    }
}

/// A range's ends that still need comparing (`None`: the region lies
/// within that end).
type Bounds = (Option<u128>, Option<u128>);
