//! Generated XDP programs: a decision list short and plain enough (see
//! [`ineligible`]) becomes straight-line eBPF — the packet parsed into
//! stack slots, then each entry as compare-and-branch to the next, the
//! first match returning its verdict — with no image, no maps, no calls.
//! The idea is bpfilter's (programs generated from the rules); the code
//! is this crate's own: a small assembler (`codegen/asm.rs`), the parser
//! (`codegen/parse.rs`, the decisions of `bpf/lib/parse.h`) and the rules
//! (`codegen/rules.rs`). Loaded with `BPF_PROG_LOAD` and test-run as the
//! benchmark's floor is. docs/dataplane.md, "Generated programs", says
//! what it does and does not do that the walker does.

mod asm;
mod attached;
mod choice;
mod parse;
mod rules;
mod tree;

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use aya_obj::generated::{bpf_attr, bpf_cmd};
use parapet_model::DecisionList;

pub use attached::{
    generate_attached, load_attached, Maps, GENERATED_PROG_NAME, GENERATED_TREE_PROG_NAME,
};
pub use choice::{
    choose, choose_with_image, rule_jumps, Choice, EngineWant, XdpEngine, AUTO_MAX_JUMPS,
    AUTO_MAX_TREE_ENTRIES,
};
pub use rules::{ineligible, MAX_BRANCHES, MAX_ENTRIES};
pub use tree::{
    generate_tree, generate_tree_attached, load_tree_attached, load_tree_attached_within,
    tree_ineligible, TreeProgram, TreeShape, MAX_TREE_INSNS, MAX_TREE_PROGRAMS,
    MAX_TREE_TOTAL_INSNS, TREE_PROGRAM_BUDGET,
};

use crate::abi::TestRunOutcome;
use crate::attach::AttachPoint;
use crate::error::{Error, Result};
use crate::floor::test_run_fd;
use crate::netfilter::{owned, sys_bpf};

/// `BPF_PROG_TYPE_XDP`.
const PROG_TYPE_XDP: u32 = 6;

/// `BPF_MAP_TYPE_PERCPU_ARRAY`.
const MAP_TYPE_PERCPU_ARRAY: u32 = 6;

/// The instructions (8 bytes each) of `list`'s program, or why it has
/// none; with `counters` (a per-CPU array of `{packets, bytes}`, one per
/// entry and the policy last) it counts as the walker counts.
pub fn generate(list: &DecisionList, counters: Option<BorrowedFd<'_>>) -> Result<Vec<[u8; 8]>> {
    if let Some(why) = ineligible(list) {
        return Err(Error::Codegen(format!("not eligible: {why}")));
    }
    let mut a = asm::Asm::default();
    let exits = parse::Exits {
        classify: a.label(),
        drop: a.label(),
        pass: a.label(),
    };
    let counters = counters.map(|fd| fd.as_raw_fd());
    parse::emit_parser(&mut a, rules::used_slots(list, counters.is_some()), &exits);
    a.bind(exits.drop);
    a.ret(parse::XDP_DROP);
    a.bind(exits.pass);
    a.ret(parse::XDP_PASS);
    rules::emit_rules(&mut a, list, exits.classify, counters);
    a.finish()
        .map_err(|e| Error::Codegen(format!("assembling: {e:?}")))
}

/// A loaded generated XDP program.
#[derive(Debug)]
pub struct GeneratedXdp {
    fd: OwnedFd,
    insns: usize,
    /// The per-entry counters, when it counts.
    counters: Option<OwnedFd>,
    entries: usize,
    /// The split tree form's prog array, kept open while the program runs.
    _prog_array: Option<OwnedFd>,
}

impl GeneratedXdp {
    /// Generate `list`'s program and load it (the verifier's log in the
    /// error when it refuses); `counted`: with per-entry counters, as the
    /// walker keeps them.
    pub fn load(list: &DecisionList, counted: bool) -> Result<GeneratedXdp> {
        let entries = list.entries.len();
        let counters = match counted {
            true => Some(create_counters(entries as u32 + 1)?),
            false => None,
        };
        let prog = generate(list, counters.as_ref().map(|fd| fd.as_fd()))?;
        let fd = load_checked(&prog)?;
        Ok(GeneratedXdp {
            fd,
            insns: prog.len(),
            counters,
            entries,
            _prog_array: None,
        })
    }

    /// `(packets, bytes)` of each entry and, last, of the policy, summed
    /// over the CPUs; `None` for a program loaded without counters.
    pub fn counters(&self) -> Result<Option<Vec<(u64, u64)>>> {
        let Some(map) = &self.counters else {
            return Ok(None);
        };
        let cpus =
            aya::util::nr_cpus().map_err(|(what, e)| Error::Codegen(format!("{what}: {e}")))?;
        let mut out = Vec::with_capacity(self.entries + 1);
        let mut values = vec![0u64; 2 * cpus];
        for idx in 0..=self.entries as u32 {
            // SAFETY: zeroed bpf_attr is valid.
            let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
            // SAFETY: plain fields of the map-element arm; key and values
            // (16 bytes per possible CPU, as the kernel writes a per-CPU
            // value) outlive the call.
            unsafe {
                let u = &mut attr.__bindgen_anon_2;
                u.map_fd = map.as_raw_fd() as u32;
                u.key = &idx as *const u32 as u64;
                u.__bindgen_anon_1.value = values.as_mut_ptr() as u64;
            }
            sys_bpf(bpf_cmd::BPF_MAP_LOOKUP_ELEM, &mut attr)
                .map_err(|e| Error::Codegen(format!("reading counter {idx}: {e}")))?;
            let sum = |k: usize| values.iter().skip(k).step_by(2).sum::<u64>();
            out.push((sum(0), sum(1)));
        }
        Ok(Some(out))
    }

    /// Instructions in the program.
    pub fn insn_count(&self) -> usize {
        self.insns
    }

    /// The instructions the verifier walked to load it.
    pub fn verified_insns(&self) -> Result<u32> {
        crate::bpf_sys::prog_verified_insns(self.fd.as_fd())
            .map_err(|e| Error::Codegen(format!("reading the program's info: {e}")))
    }

    /// `BPF_PROG_TEST_RUN` on `frame`, `repeat` times, with the context
    /// the main program's test runs have for `ifindex`.
    pub fn test_run(&self, frame: &[u8], ifindex: u32, repeat: u32) -> Result<TestRunOutcome> {
        test_run_fd(self.fd.as_fd(), AttachPoint::Xdp, frame, ifindex, repeat)
    }
}

/// `prog` loaded as an XDP program, or the verifier's refusal with the
/// last lines of its log.
fn load_checked(prog: &[[u8; 8]]) -> Result<OwnedFd> {
    load_checked_named(prog, GENERATED_PROG_NAME)
}

/// [`load_checked`], the program named `name` in the kernel.
fn load_checked_named(prog: &[[u8; 8]], name: &str) -> Result<OwnedFd> {
    let license = CString::new("GPL").expect("no NUL");
    let mut log = vec![0u8; 1 << 20];
    match load_logged(prog, &license, None, name) {
        Ok(fd) => Ok(fd),
        // again with the verifier's log, to say why
        Err(first) => {
            let _ = load_logged(prog, &license, Some((&mut log, 1)), name);
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]);
            let tail: String = text
                .lines()
                .rev()
                .take(20)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n");
            Err(Error::Codegen(format!(
                "the verifier refused the generated program ({} instructions): {first}\n{tail}",
                prog.len()
            )))
        }
    }
}

/// A per-CPU array of `entries` `{packets, bytes}` counters.
fn create_counters(entries: u32) -> Result<OwnedFd> {
    // SAFETY: zeroed bpf_attr is valid.
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    // SAFETY: plain integer fields of the map-create arm.
    unsafe {
        let u = &mut attr.__bindgen_anon_1;
        u.map_type = MAP_TYPE_PERCPU_ARRAY;
        u.key_size = 4;
        u.value_size = 16;
        u.max_entries = entries;
    }
    sys_bpf(bpf_cmd::BPF_MAP_CREATE, &mut attr)
        .map(owned)
        .map_err(|e| Error::Codegen(format!("creating the counters: {e}")))
}

/// The verifier's log of loading `prog` at `level` (1: the path of a
/// refusal; 2: every instruction's state and the stack liveness passes,
/// `live stack update done` at each), whether or not it loads; the
/// program is unloaded again. For tests that ask the kernel what its
/// verifier did.
pub fn verifier_log(prog: &[[u8; 8]], level: u32) -> Result<String> {
    let license = CString::new("GPL").expect("no NUL");
    // the kernel refuses a log that does not fit (ENOSPC): grow it
    let mut size = 16usize << 20;
    loop {
        let mut log = vec![0u8; size];
        let outcome = load_logged(prog, &license, Some((&mut log, level)), GENERATED_PROG_NAME);
        let full = matches!(&outcome, Err(e) if e.raw_os_error() == Some(libc::ENOSPC));
        if full && size < 1 << 30 {
            size *= 4;
            continue;
        }
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        return Ok(String::from_utf8_lossy(&log[..end]).into_owned());
    }
}

fn load_raw(
    prog: &[[u8; 8]],
    license: &CString,
    log: Option<&mut [u8]>,
) -> std::io::Result<OwnedFd> {
    load_logged(prog, license, log.map(|log| (log, 1)), GENERATED_PROG_NAME)
}

/// [`load_raw`] with the log's level.
fn load_logged(
    prog: &[[u8; 8]],
    license: &CString,
    log: Option<(&mut [u8], u32)>,
    name: &str,
) -> std::io::Result<OwnedFd> {
    // SAFETY: zeroed bpf_attr is valid.
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    // SAFETY: plain integer fields of the prog_load arm; prog, license and
    // log outlive the syscall.
    unsafe {
        let u = &mut attr.__bindgen_anon_3;
        u.prog_type = PROG_TYPE_XDP;
        u.insns = prog.as_ptr() as u64;
        u.insn_cnt = prog.len() as u32;
        u.license = license.as_ptr() as u64;
        // the name `stats` and a restarted parapetd know it by on a link
        for (d, s) in u.prog_name.iter_mut().zip(name.bytes()) {
            *d = s as _;
        }
        // as aya loads the main program: an XDP link swaps only between
        // programs of the same expected attach type
        u.expected_attach_type = aya_obj::generated::bpf_attach_type::BPF_XDP as u32;
        if let Some((log, level)) = log {
            u.log_level = level;
            u.log_buf = log.as_mut_ptr() as u64;
            u.log_size = log.len() as u32;
        }
    }
    sys_bpf(bpf_cmd::BPF_PROG_LOAD, &mut attr).map(owned)
}
