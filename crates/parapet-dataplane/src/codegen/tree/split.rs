//! The tree form split over several programs, for lists whose trees are
//! more code than one program may be: the verifier walks at most a
//! million instructions per program (`MAX_TREE_INSNS`), and a program
//! reached by `bpf_tail_call` is verified on its own. The partitions are
//! cut into runs of at most [`TREE_PROGRAM_BUDGET`] instructions (sizes
//! from the first, dry generation); the first program parses, saves what
//! the trees compare to a per-CPU state map, and walks its run; at a run's
//! end it stores the best entry so far and tail-calls the next program
//! through a prog array (constant index: the JIT patches a direct jump),
//! which restores the fields and the best entry and walks on; the last
//! has the verdict dispatch. Each program has its own counted exits, so
//! counting is as in one program. docs/dataplane.md, "The tree form",
//! *Split*.
//!
//! The state map is per-CPU: an XDP program runs to its end on one CPU,
//! tail calls included, so nothing is shared between CPUs. A tail call
//! that fails (an empty prog array slot: its last descriptor and pin
//! gone, which the kernel answers by emptying it) drops the packet:
//! never open.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use aya_obj::generated::{bpf_attr, bpf_cmd};
use parapet_image::Image;
use parapet_model::DecisionList;

use super::super::asm::{Alu, Asm, Cond, Size, FP, R0, R1, R2, R3};
use super::super::attached::{IFINDEX, STATS_ON};
use super::super::parse::{Slot, XDP_DROP};
use super::homes::{Homes, BEST};
use super::{emit, tree_ineligible, Gen, TreeShape, MAX_TREE_INSNS, ZERO};
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

/// The most programs of a split tree form: 33 tail calls is the kernel's
/// limit per packet (`MAX_TAIL_CALL_CNT`).
pub const MAX_TREE_PROGRAMS: usize = 16;

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
const STATE_BYTES: u32 = STATE_BEST as u32 + 8;

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
    /// The partition each program after the first starts at (the
    /// partitions' count: the verdict dispatch alone).
    starts: Vec<usize>,
    /// The programs before the one being generated.
    done: Vec<Asm>,
}

impl Split {
    /// A program starts at partition `p`.
    pub(super) fn starts_at(&self, p: usize) -> bool {
        self.starts.contains(&p)
    }

    /// Instructions in the finished programs.
    pub(super) fn emitted(&self) -> usize {
        self.done.iter().map(Asm::len).sum()
    }
}

/// `*(fp + KEY) = 0; r0 = lookup(state, fp + KEY)`, the packet dropped
/// when there is none (there always is: a per-CPU array of one).
fn lookup_state(a: &mut Asm, state: i32) {
    let found = a.label();
    a.store_imm32(FP, KEY, 0);
    a.ld_map_fd(R1, state);
    a.alu_reg(Alu::Mov, R2, FP);
    a.alu_imm(Alu::Add, R2, i32::from(KEY));
    a.call(MAP_LOOKUP_ELEM);
    a.jmp_imm(Cond::Ne, R0, 0, found);
    a.ret(XDP_DROP);
    a.bind(found);
}

impl Gen<'_> {
    fn split_fds(&self) -> (i32, i32) {
        let s = self.split.as_ref().expect("a split tree form");
        (s.state, s.progs)
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
        let (state, _) = self.split_fds();
        let saved = self.saved();
        let a = &mut self.a;
        lookup_state(a, state);
        for (stack, at) in saved {
            a.load(Size::Dw, R1, FP, stack);
            a.store(R0, at, R1);
        }
    }

    /// Ends this program with the tail call to the next (the best entry so
    /// far stored for it) and its exits, and starts the next with its
    /// prologue: the slots and the best entry restored, the fields loaded
    /// as after the parser.
    pub(super) fn next_program(&mut self) -> Result<()> {
        let (state, progs) = self.split_fds();
        let next = self.split.as_ref().map_or(0, |s| s.done.len()) + 1;
        let a = &mut self.a;
        lookup_state(a, state);
        a.store(R0, STATE_BEST, BEST);
        a.load(Size::Dw, R1, FP, CTX);
        a.ld_map_fd(R2, progs);
        a.alu_imm(Alu::Mov, R3, next as i32);
        a.call(TAIL_CALL);
        a.ret(XDP_DROP);
        self.exits();
        let finished = std::mem::take(&mut self.a);
        if let Some(s) = &mut self.split {
            s.done.push(finished);
        }
        self.exit_pass = self.a.label();
        self.exit_drop = self.a.label();
        if let Some(c) = &mut self.counted {
            c.fresh_exits(&mut self.a);
        }
        // the continuation: r1 the context, as the first program had it
        let saved = self.saved();
        let a = &mut self.a;
        a.store(FP, CTX, R1);
        super::store_opaque_zero(a);
        lookup_state(a, state);
        for (stack, at) in saved {
            a.load(Size::Dw, R1, R0, at);
            a.store(FP, stack, R1);
        }
        a.load(Size::Dw, BEST, R0, STATE_BEST);
        self.load_fields(false);
        Ok(())
    }
}

/// Where programs after the first start, from the dry generation's
/// per-partition `sizes`, its `header` (parser and prologue) and its
/// `total`: runs of partitions filled up to [`TREE_PROGRAM_BUDGET`]; the
/// verdict dispatch (what follows the last partition) alone when it does
/// not fit the last run.
fn plan(
    sizes: &[(usize, usize)],
    header: usize,
    total: usize,
    n_parts: usize,
    budget: usize,
) -> Result<Vec<usize>> {
    let trees: usize = sizes.iter().map(|s| s.1).sum();
    let tail = total.saturating_sub(header + trees);
    let mut starts = Vec::new();
    let (mut run, mut in_run) = (header, 0);
    for &(p, n) in sizes {
        // a partition alone in its program may take up to the kernel's
        // limit (the verifier then says whether it walks it)
        if n + PROGRAM_OVERHEAD > MAX_TREE_INSNS {
            return Err(Error::Codegen(format!(
                "partition {p}'s tree alone is {n} instructions, more than one program holds"
            )));
        }
        if run + n + PROGRAM_OVERHEAD > budget && in_run > 0 {
            starts.push(p);
            (run, in_run) = (PROGRAM_OVERHEAD, 0);
        }
        run += n;
        in_run += 1;
    }
    if run + tail + PROGRAM_OVERHEAD > budget {
        starts.push(n_parts);
    }
    if starts.len() + 1 > MAX_TREE_PROGRAMS {
        return Err(Error::Codegen(format!(
            "{} programs of at most {budget} instructions, more than the \
             {MAX_TREE_PROGRAMS} of the tree form",
            starts.len() + 1
        )));
    }
    Ok(starts)
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
    let dry = emit(list, image, Homes::default(), maps, None, MAX_TREE_TOTAL_INSNS)?;
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
    let starts = plan(&dry.sizes, dry.header, dry.a.len(), n_parts, budget)?;
    let state = create_map(MAP_TYPE_PERCPU_ARRAY, STATE_BYTES, 1)?;
    let prog_array = create_map(MAP_TYPE_PROG_ARRAY, 4, starts.len() as u32 + 1)?;
    let split = Split {
        state: state.as_raw_fd(),
        progs: prog_array.as_raw_fd(),
        starts,
        done: Vec::new(),
    };
    let mut g = emit(list, image, homes, maps, Some(split), MAX_TREE_TOTAL_INSNS)?;
    let mut asms = g.split.take().map(|s| s.done).unwrap_or_default();
    asms.push(g.a);
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

#[cfg(test)]
mod tests {
    use super::*;

    const B: usize = TREE_PROGRAM_BUDGET;

    #[test]
    fn the_plan_fills_programs_up_to_the_budget() {
        let sizes: Vec<(usize, usize)> = (0..10).map(|p| (p, 200_000)).collect();
        let starts = plan(&sizes, 1_000, 1_000 + 2_000_000 + 500, 10, B).unwrap();
        assert_eq!(starts, vec![2, 4, 6, 8]);
        // small enough for one: no starts
        let sizes = [(0, 1_000), (3, 2_000)];
        assert!(plan(&sizes, 900, 4_000, 4, B).unwrap().is_empty());
        // a dispatch that does not fit the last run is a program alone
        let sizes = [(0, 300_000), (1, 140_000)];
        assert_eq!(plan(&sizes, 900, 900 + 440_000 + 100_000, 2, B).unwrap(), vec![2]);
    }

    #[test]
    fn too_many_programs_or_too_large_a_partition_is_refused() {
        let sizes: Vec<(usize, usize)> = (0..40).map(|p| (p, 400_000)).collect();
        assert!(plan(&sizes, 1_000, 16_001_000, 40, B).is_err());
        let sizes = [(0, 100_000), (1, 1_200_000)];
        let e = plan(&sizes, 1_000, 1_301_000, 2, B).unwrap_err();
        assert!(e.to_string().contains("partition 1"), "{e}");
    }
}
