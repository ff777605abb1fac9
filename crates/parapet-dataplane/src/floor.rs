//! The benchmark's floor at XDP and tc: a program of the same type that
//! reads nothing and returns "pass" (`XDP_PASS`, `TC_ACT_OK`), run with
//! `BPF_PROG_TEST_RUN` on the same frame and context as the real program,
//! so that what the kernel spends around any program (the test-run loop,
//! the context set-up, the clock reads) cancels out of "ns above the
//! floor". The netfilter hooks' twin is [`crate::NfFloor`]. Also
//! [`TestRunner`]: parapet's own program as a `Send` handle, for timing it
//! on several CPUs at once.

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use aya_obj::generated::{bpf_attr, bpf_cmd};

use crate::abi::TestRunOutcome;
use crate::attach::AttachPoint;
use crate::error::{Error, Result};
use crate::load::{Dataplane, PROG_TC, PROG_XDP};
use crate::netfilter::{owned, sys_bpf};
use crate::test_run::{test_ctx, TC_ACT_OK, XDP_PASS};
use aya::programs::{SchedClassifier, Xdp};

/// `enum bpf_prog_type`: `BPF_PROG_TYPE_SCHED_CLS`, `BPF_PROG_TYPE_XDP`.
const PROG_TYPE_SCHED_CLS: u32 = 3;
const PROG_TYPE_XDP: u32 = 6;

/// A loaded trivial program of the XDP or the tc type.
#[derive(Debug)]
pub struct PassFloor {
    hook: AttachPoint,
    fd: OwnedFd,
}

impl PassFloor {
    /// Load `r0 = XDP_PASS; exit` (XDP) or `r0 = TC_ACT_OK; exit` (tc).
    pub fn load(hook: AttachPoint) -> Result<PassFloor> {
        let (prog_type, ret) = match hook {
            AttachPoint::Xdp => (PROG_TYPE_XDP, XDP_PASS),
            AttachPoint::Tc => (PROG_TYPE_SCHED_CLS, TC_ACT_OK),
            AttachPoint::Netfilter => {
                return Err(Error::Floor("the netfilter hooks' floor is NfFloor".into()))
            }
        };
        // BPF_ALU64 | BPF_MOV | BPF_K: r0 = ret; BPF_JMP | BPF_EXIT
        let r = ret.to_le_bytes();
        let raw: [[u8; 8]; 2] = [
            [0xb7, 0, 0, 0, r[0], r[1], r[2], r[3]],
            [0x95, 0, 0, 0, 0, 0, 0, 0],
        ];
        let license = CString::new("GPL").expect("no NUL");
        // SAFETY: zeroed bpf_attr is valid.
        let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
        // SAFETY: plain integer fields of the prog_load arm; raw and
        // license outlive the syscall.
        unsafe {
            let u = &mut attr.__bindgen_anon_3;
            u.prog_type = prog_type;
            u.insns = raw.as_ptr() as u64;
            u.insn_cnt = raw.len() as u32;
            u.license = license.as_ptr() as u64;
        }
        let fd = sys_bpf(bpf_cmd::BPF_PROG_LOAD, &mut attr)
            .map(owned)
            .map_err(|e| Error::Floor(format!("loading the {hook:?} floor program: {e}")))?;
        Ok(PassFloor { hook, fd })
    }

    /// The hook whose type the program has.
    pub fn hook(&self) -> AttachPoint {
        self.hook
    }

    /// `BPF_PROG_TEST_RUN` of the floor program on `frame`, with the
    /// context [`Dataplane::test_run`](crate::Dataplane::test_run) gives
    /// the real one for the same `ifindex`.
    pub fn test_run(&self, frame: &[u8], ifindex: u32, repeat: u32) -> Result<TestRunOutcome> {
        test_run_fd(self.fd.as_fd(), self.hook, frame, ifindex, repeat)
    }
}

/// parapet's XDP or tc program as a file descriptor of its own: what a
/// benchmark thread needs to test-run it while others do the same (the
/// [`Dataplane`](crate::Dataplane) handle stays with its owner).
#[derive(Debug)]
pub struct TestRunner {
    hook: AttachPoint,
    fd: OwnedFd,
}

impl Dataplane {
    /// The XDP or tc program as a [`TestRunner`]: its own fd, for test
    /// runs from other threads.
    pub fn test_runner(&self, hook: AttachPoint) -> Result<TestRunner> {
        let name = match hook {
            AttachPoint::Xdp => PROG_XDP,
            AttachPoint::Tc => PROG_TC,
            AttachPoint::Netfilter => {
                return Err(Error::Floor("a test runner is for XDP or tc".into()))
            }
        };
        let prog = self.ebpf.program(name).ok_or(Error::Missing("program"))?;
        let fd = match hook {
            AttachPoint::Xdp => <&Xdp>::try_from(prog)?.fd()?.as_fd().try_clone_to_owned(),
            _ => <&SchedClassifier>::try_from(prog)?
                .fd()?
                .as_fd()
                .try_clone_to_owned(),
        }
        .map_err(|e| Error::Floor(format!("duplicating the program fd: {e}")))?;
        Ok(TestRunner { hook, fd })
    }
}

impl TestRunner {
    /// [`Dataplane::test_run`](crate::Dataplane::test_run), from any thread.
    pub fn test_run(&self, frame: &[u8], ifindex: u32, repeat: u32) -> Result<TestRunOutcome> {
        test_run_fd(self.fd.as_fd(), self.hook, frame, ifindex, repeat)
    }
}

/// `BPF_PROG_TEST_RUN` of the XDP or tc program `fd` on `frame`.
pub(crate) fn test_run_fd(
    fd: BorrowedFd<'_>,
    hook: AttachPoint,
    frame: &[u8],
    ifindex: u32,
    repeat: u32,
) -> Result<TestRunOutcome> {
    if frame.len() < 14 {
        return Err(Error::FrameTooShort(frame.len()));
    }
    let ctx = test_ctx(hook, frame.len(), ifindex);
    // SAFETY: zeroed bpf_attr is valid.
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    // SAFETY: plain integer fields of the test arm; buffers outlive the call.
    unsafe {
        let t = &mut attr.test;
        t.prog_fd = fd.as_raw_fd() as u32;
        t.data_in = frame.as_ptr() as u64;
        t.data_size_in = frame.len() as u32;
        if !ctx.is_empty() {
            t.ctx_in = ctx.as_ptr() as u64;
            t.ctx_size_in = ctx.len() as u32;
        }
        t.repeat = repeat.max(1);
    }
    sys_bpf(bpf_cmd::BPF_PROG_TEST_RUN, &mut attr)
        .map_err(|e| Error::Floor(format!("BPF_PROG_TEST_RUN at {hook:?}: {e}")))?;
    // SAFETY: the kernel filled the test arm.
    let (retval, duration) = unsafe { (attr.test.retval, attr.test.duration) };
    let pass = match hook {
        AttachPoint::Xdp => XDP_PASS,
        _ => TC_ACT_OK,
    };
    Ok(TestRunOutcome {
        retval,
        passed: retval == pass,
        duration: Duration::from_nanos(duration.into()),
    })
}
