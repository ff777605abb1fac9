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
mod parse;
mod rules;

use std::ffi::CString;
use std::os::fd::{AsFd, OwnedFd};

use aya_obj::generated::{bpf_attr, bpf_cmd};
use parapet_model::DecisionList;

pub use rules::{ineligible, MAX_BRANCHES, MAX_ENTRIES};

use crate::abi::TestRunOutcome;
use crate::attach::AttachPoint;
use crate::error::{Error, Result};
use crate::floor::test_run_fd;
use crate::netfilter::{owned, sys_bpf};

/// `BPF_PROG_TYPE_XDP`.
const PROG_TYPE_XDP: u32 = 6;

/// The instructions (8 bytes each) of `list`'s program, or why it has
/// none.
pub fn generate(list: &DecisionList) -> Result<Vec<[u8; 8]>> {
    if let Some(why) = ineligible(list) {
        return Err(Error::Codegen(format!("not eligible: {why}")));
    }
    let mut a = asm::Asm::default();
    let exits = parse::Exits {
        classify: a.label(),
        drop: a.label(),
        pass: a.label(),
    };
    parse::emit_parser(&mut a, rules::used_slots(list), &exits);
    a.bind(exits.drop);
    a.ret(parse::XDP_DROP);
    a.bind(exits.pass);
    a.ret(parse::XDP_PASS);
    rules::emit_rules(&mut a, list, exits.classify);
    a.finish()
        .map_err(|e| Error::Codegen(format!("assembling: {e:?}")))
}

/// A loaded generated XDP program.
#[derive(Debug)]
pub struct GeneratedXdp {
    fd: OwnedFd,
    insns: usize,
}

impl GeneratedXdp {
    /// Generate `list`'s program and load it (the verifier's log in the
    /// error when it refuses).
    pub fn load(list: &DecisionList) -> Result<GeneratedXdp> {
        let prog = generate(list)?;
        let license = CString::new("GPL").expect("no NUL");
        let mut log = vec![0u8; 1 << 20];
        let fd = match load_raw(&prog, &license, None) {
            Ok(fd) => fd,
            // again with the verifier's log, to say why
            Err(first) => {
                let _ = load_raw(&prog, &license, Some(&mut log));
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
                return Err(Error::Codegen(format!(
                    "the verifier refused the generated program ({} instructions): {first}\n{tail}",
                    prog.len()
                )));
            }
        };
        Ok(GeneratedXdp {
            fd,
            insns: prog.len(),
        })
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

fn load_raw(
    prog: &[[u8; 8]],
    license: &CString,
    log: Option<&mut [u8]>,
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
        if let Some(log) = log {
            u.log_level = 1;
            u.log_buf = log.as_mut_ptr() as u64;
            u.log_size = log.len() as u32;
        }
    }
    sys_bpf(bpf_cmd::BPF_PROG_LOAD, &mut attr).map(owned)
}
