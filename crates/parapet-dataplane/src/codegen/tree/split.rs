//! The tree form split over several programs, for lists whose trees are
//! more code than one program may be: the verifier walks at most a
//! million instructions per program (`MAX_TREE_INSNS`), and a program
//! reached by `bpf_tail_call` is verified on its own. The plan comes from
//! the first, dry generation's sizes ([`plan`]): partitions packed into
//! main-line programs of at most [`TREE_PROGRAM_BUDGET`] instructions; a
//! partition larger than that has subtrees cut out into programs of their
//! own, siblings grouped into one ([`cut`]), which continue at the next
//! main-line program. The first program parses and saves what the trees
//! compare to a per-CPU state map; every tail call (through a prog array,
//! constant index: the JIT patches a direct jump) stores the best entry
//! so far, and the program it enters restores the fields and the best
//! entry and walks on; the last has the verdict dispatch. Each program has
//! its own counted exits, so counting is as in one program.
//! docs/dataplane.md, "The tree form", *Split*.
//!
//! The state map is per-CPU: an XDP program runs to its end on one CPU,
//! tail calls included, so nothing is shared between CPUs. A tail call
//! that fails (an empty prog array slot: its last descriptor and pin
//! gone, which the kernel answers by emptying it) drops the packet:
//! never open.

use std::collections::BTreeMap;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use aya_obj::generated::{bpf_attr, bpf_cmd};
use parapet_image::Image;
use parapet_model::DecisionList;

use super::super::asm::{Alu, Asm, Cond, Label, Size, FP, R0, R1, R2, R3};
use super::super::attached::{IFINDEX, STATS_ON};
use super::super::parse::{Slot, XDP_DROP};
use super::counted::Counted;
use super::homes::{Homes, BEST};
use super::{emit, tree_ineligible, Gen, Occ, PartSize, Region, TreeShape, MAX_TREE_INSNS, ZERO};
use crate::codegen::attached::Maps;
use crate::error::{Error, Result};
use crate::netfilter::{owned, sys_bpf};

/// The instructions of one program of a split tree form at most (the
/// first run may hold one partition more than this when it alone is
/// larger, up to [`MAX_TREE_INSNS`]). One program of the tree form walks
/// 1.1–2 times its instructions in the verifier (docs/dataplane.md):
/// 450,000 keeps the walk under the million, and every list measured
/// before the split (fw1 10k attached: 368,989) in one program.
pub const TREE_PROGRAM_BUDGET: usize = 450_000;

/// The most programs of a split tree form (the prog array's size).
pub const MAX_TREE_PROGRAMS: usize = 64;

/// The most programs on a packet's path: the kernel's limit of 33 tail
/// calls per packet (`MAX_TAIL_CALL_CNT`), the first program not one.
const MAX_CHAIN: usize = 34;

/// Instructions of a tail call ([`Gen::tail_call`]).
const TAIL_CALL_INSNS: usize = 20;

/// The most instructions the tree form generates in all its programs: the
/// bound on generation and on the verifier's time (about 5 µs per
/// instruction walked, docs/dataplane.md), past which parapetd keeps the
/// walker. ClassBench at 100k rules is 1.9–2.2 million.
pub const MAX_TREE_TOTAL_INSNS: usize = 4_000_000;

/// Instructions a program adds around its run of partitions: the
/// continuation's prologue, the tail call, the exits.
const PROGRAM_OVERHEAD: usize = 400;

/// The stack slots of the split form, below the tree form's zero: the
/// context (for the tail call) and a map key.
pub(super) const CTX: i16 = ZERO - 8;
const KEY: i16 = ZERO - 16;

/// The state map's value: the parser's slots at 8 × their index, then
/// the statistics switch, the ingress interface and the best entry.
const STATE_STATS_ON: i16 = 8 * Slot::ALL.len() as i16;
const STATE_IFINDEX: i16 = STATE_STATS_ON + 8;
const STATE_BEST: i16 = STATE_IFINDEX + 8;
/// Which member of a group of subtrees ([`Plan::groups`]) its program runs.
const STATE_WHICH: i16 = STATE_BEST + 8;
const STATE_BYTES: u32 = STATE_WHICH as u32 + 8;

/// `BPF_FUNC_map_lookup_elem`, `BPF_FUNC_tail_call`.
const MAP_LOOKUP_ELEM: i32 = 1;
const TAIL_CALL: i32 = 12;

/// `BPF_MAP_TYPE_PROG_ARRAY`, `BPF_MAP_TYPE_PERCPU_ARRAY`.
const MAP_TYPE_PROG_ARRAY: u32 = 3;
const MAP_TYPE_PERCPU_ARRAY: u32 = 6;

/// The kernel name of the programs after the first (the first is named
/// as the single program is).
pub const TREE_PART_PROG_NAME: &str = "parapet_gtpart";

/// A loaded tree program: its entry and, split, the prog array holding
/// the rest.
#[derive(Debug)]
pub struct TreeProgram {
    /// The program to run or attach.
    pub entry: OwnedFd,
    /// The prog array the entry reaches the other programs through
    /// (split form only). The kernel empties a prog array when its last
    /// descriptor and pin are gone: whoever runs the entry keeps it open
    /// or pinned.
    pub prog_array: Option<OwnedFd>,
    /// The programs after the entry (split form; the prog array holds
    /// them too), for their verifier statistics.
    pub parts: Vec<OwnedFd>,
}

/// The split being generated.
pub(super) struct Split {
    state: i32,
    progs: i32,
    plan: Plan,
    /// Per program index: the finished programs (`None`: being generated,
    /// or suspended while a subtree of its has a program generated).
    programs: Vec<Option<Asm>>,
    /// The index of the main line's program being generated.
    pub(super) current: usize,
    /// Tail calls to the program after the partition being generated (at
    /// the end of its subtrees' programs): (program, instruction of the
    /// index), set when that program starts.
    pending: Vec<(usize, usize)>,
    /// The groups whose program has started, by group.
    live: BTreeMap<usize, Group>,
    /// The tail-call blocks of the program being generated: their label
    /// and target group program (`None`: the program after the partition).
    calls: Vec<(Label, Option<usize>)>,
}

/// A group's program while its members are generated: its index, a label
/// per member, its exits, the members still to come.
struct Group {
    prog: usize,
    members: Vec<Label>,
    exit_pass: Label,
    exit_drop: Label,
    counted: Option<(Label, Label)>,
    left: usize,
    calls: Vec<(Label, Option<usize>)>,
}

impl Split {
    /// A main-line program starts at partition `p`.
    pub(super) fn starts_at(&self, p: usize) -> bool {
        self.plan.starts.contains(&p)
    }

    /// Occurrence `occ` ([`super::Occ`]) is in a program of its own.
    pub(super) fn extracts(&self, occ: usize) -> bool {
        self.plan.extract.contains_key(&occ)
    }

    /// Instructions in the finished programs.
    pub(super) fn emitted(&self) -> usize {
        self.programs.iter().flatten().map(Asm::len).sum()
    }

    fn alloc(&mut self) -> usize {
        self.programs.push(None);
        self.programs.len() - 1
    }
}

/// The labels of the program being generated, kept while another is.
struct Suspended {
    calls: Vec<(Label, Option<usize>)>,
    a: Asm,
    exit_pass: Label,
    exit_drop: Label,
    counted: Option<(Label, Label)>,
    done: Option<Label>,
}

/// `r0 = lookup(state, fp + KEY)` (`*(fp + KEY) = 0` first with
/// `write_key`: once per program, at its start, as a stack write at a new
/// instruction reruns the kernel's stack liveness pass), the packet
/// dropped when there is none (there always is: a per-CPU array of one).
fn lookup_state(a: &mut Asm, state: i32, write_key: bool) {
    let found = a.label();
    if write_key {
        a.store_imm32(FP, KEY, 0);
    }
    a.ld_map_fd(R1, state);
    a.alu_reg(Alu::Mov, R2, FP);
    a.alu_imm(Alu::Add, R2, i32::from(KEY));
    a.call(MAP_LOOKUP_ELEM);
    a.jmp_imm(Cond::Ne, R0, 0, found);
    a.ret(XDP_DROP);
    a.bind(found);
}

impl Gen<'_> {
    fn split(&mut self) -> &mut Split {
        self.split.as_mut().expect("a split tree form")
    }

    /// (stack offset, state offset) of what a continuation restores: the
    /// parsed fields, and when counting the statistics switch and the
    /// ingress interface its exits read.
    fn saved(&self) -> Vec<(i16, i16)> {
        let mut v: Vec<(i16, i16)> = Slot::ALL
            .into_iter()
            .filter(|&s| self.used.has(s))
            .map(|s| (s.off(), 8 * s as i16))
            .collect();
        if self.counted.is_some() {
            v.extend([(STATS_ON, STATE_STATS_ON), (IFINDEX, STATE_IFINDEX)]);
        }
        v
    }

    /// In the first program, once the parser has filled the slots: their
    /// values to the state map.
    pub(super) fn save_state(&mut self) {
        let state = self.split().state;
        let saved = self.saved();
        let a = &mut self.a;
        lookup_state(a, state, true);
        for (stack, at) in saved {
            a.load(Size::Dw, R1, FP, stack);
            a.store(R0, at, R1);
        }
    }

    /// The best entry so far (and with `which` the member of a group's
    /// program, from r9's low 16 bits: [`Gen::call_site`]) to the state
    /// map, then the tail call to program `to`; the instruction that holds
    /// `to`, for a later [`Asm::set_imm`].
    fn tail_call(&mut self, to: usize, which: bool) -> usize {
        let (state, progs) = (self.split().state, self.split().progs);
        let a = &mut self.a;
        lookup_state(a, state, false);
        if which {
            // r9 = best << 16 | member (the call site's)
            a.alu_reg(Alu::Mov, R1, BEST);
            a.alu_imm(Alu::And, R1, 0xffff);
            a.store(R0, STATE_WHICH, R1);
            a.alu_imm(Alu::Rsh, BEST, 16);
        }
        a.store(R0, STATE_BEST, BEST);
        // the zero's and the spilled fields' slots read where every path
        // of the program that does not decide ends, as the one program's
        // verdict dispatch and guarded exits read them: the kernel's stack
        // liveness pass then knows them live everywhere once, not rerun at
        // each `set_best` (fw1 100k: 13 minutes, not 20 s)
        a.load(Size::Dw, R1, FP, ZERO);
        for s in &self.spilled {
            a.load(Size::Dw, R1, FP, s.off());
        }
        a.load(Size::Dw, R1, FP, CTX);
        a.ld_map_fd(R2, progs);
        let at = a.len();
        a.alu_imm(Alu::Mov, R3, to as i32);
        a.call(TAIL_CALL);
        a.ret(XDP_DROP);
        at
    }

    /// A tail call from here to group program `to` naming `member` (`None`:
    /// to the program after this partition): `r9 = best << 16 | member`
    /// and a jump to the program's one block for it ([`Gen::call_blocks`]),
    /// so that the stack is read at a few instructions, not at every call
    /// site (each would rerun the kernel's stack liveness pass: fw1 100k
    /// loaded in 13 minutes so).
    fn call_site(&mut self, to: Option<usize>, member: usize) {
        let found = self.split().calls.iter().find(|c| c.1 == to).map(|c| c.0);
        let label = match found {
            Some(l) => l,
            None => {
                let l = self.a.label();
                self.split().calls.push((l, to));
                l
            }
        };
        if to.is_some() {
            self.a.alu_imm(Alu::Lsh, BEST, 16);
            self.a.alu_imm(Alu::Or, BEST, member as i32);
        }
        self.a.ja_long(label);
    }

    /// At the end of program `prog`: its tail-call blocks; the one to the
    /// program after the partition gets its index when that starts.
    pub(super) fn call_blocks(&mut self, prog: usize) {
        for (label, to) in std::mem::take(&mut self.split().calls) {
            self.a.bind(label);
            let at = self.tail_call(to.unwrap_or(0), to.is_some());
            if to.is_none() {
                self.split().pending.push((prog, at));
            }
        }
    }

    /// A fresh program in `a` with its own exits, from its prologue: the
    /// slots and the best entry restored, the fields loaded as after the
    /// parser; with `members` (a group's program) then to the label of
    /// the member the state names.
    fn start_program(&mut self, members: &[Label]) {
        self.exit_pass = self.a.label();
        self.exit_drop = self.a.label();
        if let Some(c) = &mut self.counted {
            c.fresh_exits(&mut self.a);
        }
        let state = self.split().state;
        let saved = self.saved();
        // r1 the context, as the first program had it
        let a = &mut self.a;
        a.store(FP, CTX, R1);
        super::store_opaque_zero(a);
        lookup_state(a, state, true);
        for (stack, at) in saved {
            a.load(Size::Dw, R1, R0, at);
            a.store(FP, stack, R1);
        }
        a.load(Size::Dw, BEST, R0, STATE_BEST);
        // r3: what the fields' registers leave free
        a.load(Size::Dw, R3, R0, STATE_WHICH);
        self.load_fields(false);
        if !members.is_empty() {
            self.a.alu_reg(Alu::Mov, R1, R3);
            let starts: Vec<usize> = (0..members.len()).collect();
            self.index_search(&starts, members);
        }
    }

    /// Ends the main line's program with the tail call to the next and its
    /// exits, and starts the next; the programs of the last partition's
    /// subtrees continue there too.
    pub(super) fn next_program(&mut self) -> Result<()> {
        let next = self.split().alloc();
        self.tail_call(next, false);
        let current = self.split().current;
        self.call_blocks(current);
        self.exits();
        let finished = std::mem::take(&mut self.a);
        let s = self.split();
        s.programs[s.current] = Some(finished);
        s.current = next;
        for (prog, at) in std::mem::take(&mut s.pending) {
            if let Some(a) = &mut s.programs[prog] {
                a.set_imm(at, next as i32);
            }
        }
        self.start_program(&[]);
        Ok(())
    }

    /// The subtree at occurrence `occ` (child ref `r`) in its group's
    /// program: a tail call to it here, naming the member; there (the
    /// program started at the group's first member, resumed at the
    /// others) the subtree at the member's label, ending (at this
    /// partition's end) with a tail call to the program after the
    /// partition.
    pub(super) fn extracted(
        &mut self,
        occ: usize,
        r: u32,
        region: &Region,
        depth: usize,
    ) -> Result<()> {
        let (group, member) = self.split().plan.extract[&occ];
        let size = self.split().plan.groups[group].len();
        let prog = match self.split().live.get(&group) {
            Some(g) => g.prog,
            None => self.split().alloc(),
        };
        self.call_site(Some(prog), member);
        let suspended = Suspended {
            calls: std::mem::take(&mut self.split().calls),
            a: std::mem::take(&mut self.a),
            exit_pass: self.exit_pass,
            exit_drop: self.exit_drop,
            counted: self.counted.as_ref().map(Counted::exits),
            done: self.done,
        };
        let mut g = match self.split().live.remove(&group) {
            Some(mut g) => {
                let s = self.split();
                let a = s.programs[g.prog].take().expect("a started group");
                s.calls = std::mem::take(&mut g.calls);
                self.a = a;
                self.exit_pass = g.exit_pass;
                self.exit_drop = g.exit_drop;
                if let (Some(c), Some(exits)) = (&mut self.counted, g.counted) {
                    c.set_exits(exits);
                }
                g
            }
            None => {
                let members: Vec<Label> = (0..size).map(|_| self.a.label()).collect();
                self.start_program(&members);
                Group {
                    prog,
                    members,
                    exit_pass: self.exit_pass,
                    exit_drop: self.exit_drop,
                    counted: self.counted.as_ref().map(Counted::exits),
                    left: size,
                    calls: Vec::new(),
                }
            }
        };
        self.a.bind(g.members[member]);
        let done = self.a.label();
        self.done = Some(done);
        self.emit_node(r, region, depth)?;
        self.a.bind(done);
        // to the program after this partition
        self.call_site(None, 0);
        g.left -= 1;
        if g.left == 0 {
            self.call_blocks(prog);
            self.exits();
        }
        let program = std::mem::replace(&mut self.a, suspended.a);
        let s = self.split();
        s.programs[prog] = Some(program);
        g.calls = std::mem::replace(&mut s.calls, suspended.calls);
        if g.left > 0 {
            s.live.insert(group, g);
        }
        self.exit_pass = suspended.exit_pass;
        self.exit_drop = suspended.exit_drop;
        if let (Some(c), Some(exits)) = (&mut self.counted, suspended.counted) {
            c.set_exits(exits);
        }
        self.done = suspended.done;
        Ok(())
    }
}

/// Where the trees are split: the partitions main-line programs start at
/// (the partitions' count: the verdict dispatch), and the occurrences
/// ([`super::Occ`]) cut out into programs of their own, in groups of
/// siblings that share one (by occurrence: its group and its place in it).
#[derive(Debug, Default, PartialEq, Eq)]
struct Plan {
    starts: Vec<usize>,
    extract: BTreeMap<usize, (usize, usize)>,
    groups: Vec<Vec<usize>>,
}

/// The instructions left of occurrence `o` once the subtrees it keeps
/// are within `limit`: its children cut first, then the largest of them
/// cut out while it is over, packed into groups of at most `limit`
/// (first fit, largest first) that share a program.
fn cut(o: usize, occs: &[Occ], children: &[Vec<usize>], limit: usize, plan: &mut Plan) -> usize {
    let mut kept: Vec<(usize, usize)> = children[o]
        .iter()
        .map(|&c| (cut(c, occs, children, limit, plan), c))
        .collect();
    let theirs: usize = children[o].iter().map(|&c| occs[c].size).sum();
    let mut own = occs[o].size.saturating_sub(theirs) + kept.iter().map(|k| k.0).sum::<usize>();
    kept.sort_unstable_by(|a, b| b.cmp(a));
    let mut bins: Vec<(usize, Vec<usize>)> = Vec::new();
    for (size, c) in kept {
        if own <= limit {
            break;
        }
        own = own - size + TAIL_CALL_INSNS;
        let size = size + TAIL_CALL_INSNS;
        match bins.iter_mut().find(|b| b.0 + size <= limit) {
            Some(b) => {
                b.0 += size;
                b.1.push(c);
            }
            None => bins.push((size, vec![c])),
        }
    }
    for (_, members) in bins {
        let group = plan.groups.len();
        for (i, &m) in members.iter().enumerate() {
            plan.extract.insert(m, (group, i));
        }
        plan.groups.push(members);
    }
    own
}

/// The split of the dry generation's trees into programs of at most
/// `budget` instructions, from its partitions (`sizes`), occurrences, its
/// `header` (parser and prologue) and its `total`: a partition larger than
/// a program has subtrees cut out into programs of their own ([`cut`])
/// and the next partition starts a program (where they continue); the
/// partitions fill main-line programs in order; the verdict dispatch
/// (what follows the last partition) is a program alone when it does not
/// fit the last.
fn plan(
    sizes: &[PartSize],
    occs: &[Occ],
    header: usize,
    total: usize,
    n_parts: usize,
    budget: usize,
) -> Result<Plan> {
    let trees: usize = sizes.iter().map(|s| s.size).sum();
    let tail = total.saturating_sub(header + trees);
    let limit = budget.saturating_sub(PROGRAM_OVERHEAD);
    let mut children = vec![Vec::new(); occs.len()];
    for (i, o) in occs.iter().enumerate() {
        if let Some(p) = o.parent {
            children[p].push(i);
        }
    }
    let mut plan = Plan::default();
    let (mut run, mut in_run, mut after_cut) = (header, 0, false);
    // the programs a packet passes through at most
    let mut chain = 1;
    for ps in sizes {
        let mut n = ps.size;
        let cut_before = plan.extract.len();
        if n > limit {
            let kept = cut(ps.root, occs, &children, limit, &mut plan);
            n = n - occs[ps.root].size + kept;
            chain += plan
                .extract
                .range(ps.root..)
                .map(|(&o, _)| nesting(o, occs, &plan.extract))
                .max()
                .unwrap_or(0);
        }
        if n + PROGRAM_OVERHEAD > MAX_TREE_INSNS {
            return Err(Error::Codegen(format!(
                "partition {}'s tree keeps {n} instructions in one program, more than one holds",
                ps.part
            )));
        }
        if after_cut || (run + n + PROGRAM_OVERHEAD > budget && in_run > 0) {
            plan.starts.push(ps.part);
            (run, in_run) = (PROGRAM_OVERHEAD, 0);
            chain += 1;
        }
        run += n;
        in_run += 1;
        after_cut = plan.extract.len() > cut_before;
    }
    if after_cut || run + tail + PROGRAM_OVERHEAD > budget {
        plan.starts.push(n_parts);
        chain += 1;
    }
    let programs = 1 + plan.starts.len() + plan.groups.len();
    if programs > MAX_TREE_PROGRAMS || chain > MAX_CHAIN {
        return Err(Error::Codegen(format!(
            "{programs} programs of at most {budget} instructions, {chain} on a packet's path: \
             more than the {MAX_TREE_PROGRAMS} of the tree form or the {MAX_CHAIN} a packet \
             may pass"
        )));
    }
    Ok(plan)
}

/// How many of `o` and its ancestors are programs of their own.
fn nesting(o: usize, occs: &[Occ], extract: &BTreeMap<usize, (usize, usize)>) -> usize {
    let mut n = 0;
    let mut at = Some(o);
    while let Some(i) = at {
        n += usize::from(extract.contains_key(&i));
        at = occs[i].parent;
    }
    n
}

/// `list`'s tree form loaded, counting in `maps` when given, the first
/// (or only) program named `name`: one program when its trees fit
/// `budget` instructions ([`TREE_PROGRAM_BUDGET`] but in tests), split
/// over programs of at most that many otherwise; and its shape.
pub(crate) fn load_tree_on(
    list: &DecisionList,
    image: &Image,
    maps: Option<&Maps<'_>>,
    name: &str,
    budget: usize,
) -> Result<(TreeProgram, TreeShape)> {
    if let Some(why) = tree_ineligible(list, image) {
        return Err(Error::Codegen(format!(
            "not eligible for the tree form: {why}"
        )));
    }
    let dry = emit(
        list,
        image,
        Homes::default(),
        maps,
        None,
        MAX_TREE_TOTAL_INSNS,
    )?;
    let homes = dry.homes_by_reads();
    if dry.a.len() <= budget {
        let g = emit(list, image, homes, maps, None, MAX_TREE_INSNS)?;
        let (prog, shape) = super::one_program(g)?;
        let entry = super::super::load_checked_named(&prog, name)?;
        let loaded = TreeProgram {
            entry,
            prog_array: None,
            parts: Vec::new(),
        };
        return Ok((loaded, shape));
    }
    let n_parts = image.words()[parapet_image::hw::N_PARTITIONS] as usize;
    let plan = plan(
        &dry.sizes,
        &dry.occs,
        dry.header,
        dry.a.len(),
        n_parts,
        budget,
    )?;
    let n_programs = 1 + plan.starts.len() + plan.groups.len();
    let state = create_map(MAP_TYPE_PERCPU_ARRAY, STATE_BYTES, 1)?;
    let prog_array = create_map(MAP_TYPE_PROG_ARRAY, 4, n_programs as u32)?;
    let split = Split {
        state: state.as_raw_fd(),
        progs: prog_array.as_raw_fd(),
        plan,
        programs: vec![None],
        current: 0,
        pending: Vec::new(),
        live: BTreeMap::new(),
        calls: Vec::new(),
    };
    let mut g = emit(list, image, homes, maps, Some(split), MAX_TREE_TOTAL_INSNS)?;
    let mut s = g.split.take().expect("split");
    s.programs[s.current] = Some(g.a);
    let asms: Vec<Asm> = s.programs.into_iter().flatten().collect();
    if asms.len() != n_programs {
        return Err(Error::Codegen(format!(
            "{} programs generated, {n_programs} planned",
            asms.len()
        )));
    }
    let mut shape = g.shape;
    shape.programs = asms.len();
    shape.guarded_exits = g.homes.guarded;
    let mut fds = Vec::with_capacity(asms.len());
    for (i, a) in asms.into_iter().enumerate() {
        let prog = a
            .finish()
            .map_err(|e| Error::Codegen(format!("assembling program {i}: {e:?}")))?;
        if prog.len() > MAX_TREE_INSNS {
            return Err(Error::Codegen(format!(
                "program {i} of the split tree form is {} instructions, more than the \
                 {MAX_TREE_INSNS} the kernel loads",
                prog.len()
            )));
        }
        shape.insns += prog.len();
        shape.largest = shape.largest.max(prog.len());
        let name = if i == 0 { name } else { TREE_PART_PROG_NAME };
        let fd = super::super::load_checked_named(&prog, name)
            .map_err(|e| Error::Codegen(format!("program {i} of {}: {e}", shape.programs)))?;
        fds.push(fd);
    }
    for (i, fd) in fds.iter().enumerate().skip(1) {
        prog_array_set(&prog_array, i as u32, fd)?;
    }
    let entry = fds.remove(0);
    let loaded = TreeProgram {
        entry,
        prog_array: Some(prog_array),
        parts: fds,
    };
    Ok((loaded, shape))
}

/// A map of `map_type` with 4-byte keys, `value_size`-byte values and
/// `entries` entries.
fn create_map(map_type: u32, value_size: u32, entries: u32) -> Result<OwnedFd> {
    // SAFETY: zeroed bpf_attr is valid.
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    // SAFETY: plain integer fields of the map-create arm.
    unsafe {
        let u = &mut attr.__bindgen_anon_1;
        u.map_type = map_type;
        u.key_size = 4;
        u.value_size = value_size;
        u.max_entries = entries;
    }
    sys_bpf(bpf_cmd::BPF_MAP_CREATE, &mut attr)
        .map(owned)
        .map_err(|e| Error::Codegen(format!("creating the split tree form's map: {e}")))
}

/// `prog_array[idx] = prog`.
fn prog_array_set(prog_array: &OwnedFd, idx: u32, prog: &OwnedFd) -> Result<()> {
    let value = prog.as_fd().as_raw_fd() as u32;
    // SAFETY: zeroed bpf_attr is valid.
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    // SAFETY: plain fields of the map-element arm; key and value outlive
    // the call.
    unsafe {
        let u = &mut attr.__bindgen_anon_2;
        u.map_fd = prog_array.as_raw_fd() as u32;
        u.key = &idx as *const u32 as u64;
        u.__bindgen_anon_1.value = &value as *const u32 as u64;
    }
    sys_bpf(bpf_cmd::BPF_MAP_UPDATE_ELEM, &mut attr)
        .map(drop)
        .map_err(|e| Error::Codegen(format!("filling the prog array at {idx}: {e}")))
}

/// `list`'s tree form as parapetd attaches it (the program of
/// [`super::counted::generate_tree_attached`], or split over programs when larger than
/// one holds: `tree/split.rs`) loaded, the first program named
/// [`super::super::GENERATED_TREE_PROG_NAME`]; the verifier's last lines
/// in the error when it refuses.
pub fn load_tree_attached(
    list: &DecisionList,
    image: &Image,
    maps: &Maps<'_>,
) -> Result<(TreeProgram, TreeShape)> {
    load_tree_attached_within(list, image, maps, super::TREE_PROGRAM_BUDGET)
}

/// [`load_tree_attached`] with programs of at most `budget` instructions
/// (tests split small lists with it).
pub fn load_tree_attached_within(
    list: &DecisionList,
    image: &Image,
    maps: &Maps<'_>,
    budget: usize,
) -> Result<(TreeProgram, TreeShape)> {
    load_tree_on(
        list,
        image,
        Some(maps),
        super::super::GENERATED_TREE_PROG_NAME,
        budget,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: usize = TREE_PROGRAM_BUDGET;

    /// Partitions of `sizes` (index, instructions), each tree one leaf.
    fn leaves(sizes: &[(usize, usize)]) -> (Vec<PartSize>, Vec<Occ>) {
        let parts = sizes
            .iter()
            .enumerate()
            .map(|(i, &(part, size))| PartSize {
                part,
                size,
                root: i,
            })
            .collect();
        let occs = sizes
            .iter()
            .map(|&(_, size)| Occ { parent: None, size })
            .collect();
        (parts, occs)
    }

    #[test]
    fn the_plan_fills_programs_up_to_the_budget() {
        let sizes: Vec<(usize, usize)> = (0..10).map(|p| (p, 200_000)).collect();
        let (parts, occs) = leaves(&sizes);
        let p = plan(&parts, &occs, 1_000, 1_000 + 2_000_000 + 500, 10, B).unwrap();
        assert_eq!(p.starts, vec![2, 4, 6, 8]);
        assert!(p.extract.is_empty());
        // small enough for one: no starts
        let (parts, occs) = leaves(&[(0, 1_000), (3, 2_000)]);
        assert_eq!(
            plan(&parts, &occs, 900, 4_000, 4, B).unwrap(),
            Plan::default()
        );
        // a dispatch that does not fit the last run is a program alone
        let (parts, occs) = leaves(&[(0, 300_000), (1, 140_000)]);
        let p = plan(&parts, &occs, 900, 900 + 440_000 + 100_000, 2, B).unwrap();
        assert_eq!(p.starts, vec![2]);
    }

    #[test]
    fn a_partition_larger_than_a_program_has_its_largest_subtrees_cut_out() {
        // partition 0: a root of 40,000 instructions of its own and four
        // subtrees of 290,000; partition 1 a leaf of 10,000
        let mut occs = vec![Occ {
            parent: None,
            size: 1_200_000,
        }];
        occs.extend((0..4).map(|_| Occ {
            parent: Some(0),
            size: 290_000,
        }));
        occs.push(Occ {
            parent: None,
            size: 10_000,
        });
        let parts = [
            PartSize {
                part: 0,
                size: 1_200_500,
                root: 0,
            },
            PartSize {
                part: 1,
                size: 10_000,
                root: 5,
            },
        ];
        let p = plan(&parts, &occs, 900, 900 + 1_210_500 + 100, 2, B).unwrap();
        // three subtrees out (1.2M → 910k → 620k → 330k), the next
        // partition starts the program they continue in
        assert_eq!(p.extract.len(), 3, "{p:?}");
        assert!(!p.extract.contains_key(&0) && !p.extract.contains_key(&5));
        // 290,020 each: one a group
        assert_eq!(p.groups.len(), 3, "{p:?}");
        assert_eq!(p.starts, vec![1]);
    }

    #[test]
    fn too_many_programs_or_too_large_a_partition_is_refused() {
        let sizes: Vec<(usize, usize)> = (0..70).map(|p| (p, 400_000)).collect();
        let (parts, occs) = leaves(&sizes);
        let e = plan(&parts, &occs, 1_000, 28_001_000, 70, B).unwrap_err();
        assert!(e.to_string().contains("programs of at most"), "{e}");
        // a leaf cannot be cut
        let (parts, occs) = leaves(&[(0, 100_000), (1, 1_200_000)]);
        let e = plan(&parts, &occs, 1_000, 1_301_000, 2, B).unwrap_err();
        assert!(e.to_string().contains("partition 1"), "{e}");
    }
}
