//! Where a reverse-path check (nft's `fib saddr . iif oif missing`) could
//! run in the kernel dataplane: `bpf_fib_lookup` (helper 69) is offered to
//! tc (and XDP) programs, not to `BPF_PROG_TYPE_NETFILTER` ones (the
//! verifier: "program of this type cannot use helper bpf_fib_lookup#69";
//! vmlinux has no FIB kfunc either). This is why a rule with the check is
//! refused at the netfilter hooks (docs/hooks.md, "Reverse path"): a
//! kernel that starts offering the helper there fails this test, and the
//! refusal can be revisited.

use std::ffi::CStr;

/// `BPF_PROG_TYPE_NETFILTER` / `BPF_NETFILTER`, `BPF_PROG_TYPE_SCHED_CLS`.
const PROG_TYPE_NETFILTER: u32 = 32;
const ATTACH_NETFILTER: u32 = 45;
const PROG_TYPE_SCHED_CLS: u32 = 3;
const FUNC_FIB_LOOKUP: i32 = 69;

/// One eBPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Clone, Copy)]
struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: dst | (src << 4),
        off,
        imm,
    }
}

/// `bpf_fib_lookup(ctx, &params, 64, 0)` over zeroed stack params, then
/// return 1.
fn program() -> Vec<Insn> {
    const MOV64_K: u8 = 0xb7;
    const MOV64_X: u8 = 0xbf;
    const ADD64_K: u8 = 0x07;
    const STX_DW: u8 = 0x7b;
    const CALL: u8 = 0x85;
    const EXIT: u8 = 0x95;
    let mut p = vec![insn(MOV64_K, 0, 0, 0, 0)];
    for i in 1..=8 {
        p.push(insn(STX_DW, 10, 0, -8 * i, 0));
    }
    p.extend([
        insn(MOV64_X, 2, 10, 0, 0),
        insn(ADD64_K, 2, 0, 0, -64),
        insn(MOV64_K, 3, 0, 0, 64),
        insn(MOV64_K, 4, 0, 0, 0),
        insn(CALL, 0, 0, 0, FUNC_FIB_LOOKUP),
        insn(MOV64_K, 0, 0, 0, 1),
        insn(EXIT, 0, 0, 0, 0),
    ]);
    p
}

/// Loads the program as `prog_type`: Ok, or the verifier's log.
fn load(prog_type: u32, attach: u32) -> Result<(), String> {
    let insns = program();
    let license = c"GPL";
    let mut log = vec![0u8; 1 << 16];
    // The leading fields of `union bpf_attr` for BPF_PROG_LOAD, up to
    // expected_attach_type; the rest zero.
    let mut attr = [0u8; 128];
    let put32 =
        |a: &mut [u8; 128], at: usize, v: u32| a[at..at + 4].copy_from_slice(&v.to_ne_bytes());
    let put64 =
        |a: &mut [u8; 128], at: usize, v: u64| a[at..at + 8].copy_from_slice(&v.to_ne_bytes());
    put32(&mut attr, 0, prog_type);
    put32(&mut attr, 4, insns.len() as u32);
    put64(&mut attr, 8, insns.as_ptr() as u64);
    put64(&mut attr, 16, license.as_ptr() as u64);
    put32(&mut attr, 24, 1); // log_level
    put32(&mut attr, 28, log.len() as u32);
    put64(&mut attr, 32, log.as_mut_ptr() as u64);
    put32(&mut attr, 68, attach); // expected_attach_type
                                  // SAFETY: a BPF_PROG_LOAD attribute block whose pointers are to live
                                  // locals of the sizes given.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            5, // BPF_PROG_LOAD
            attr.as_ptr(),
            attr.len() as u32,
        )
    };
    if fd >= 0 {
        // SAFETY: the descriptor the call returned, closed once.
        unsafe { libc::close(fd as i32) };
        return Ok(());
    }
    let text = CStr::from_bytes_until_nul(&log)
        .map_or_else(|_| String::new(), |s| s.to_string_lossy().into_owned());
    Err(format!("{}: {text}", std::io::Error::last_os_error()))
}

#[test]
#[ignore = "needs root"]
fn fib_lookup_is_offered_at_tc_not_at_the_netfilter_hooks() {
    parapet_testbed::require_root();
    load(PROG_TYPE_SCHED_CLS, 0).expect("a tc program may call bpf_fib_lookup");
    let refused = load(PROG_TYPE_NETFILTER, ATTACH_NETFILTER)
        .expect_err("a netfilter program called bpf_fib_lookup: revisit the reverse-path refusal");
    assert!(
        refused.contains("cannot use helper bpf_fib_lookup#69"),
        "{refused}"
    );
}
