//! `BPF_PROG_TEST_RUN`: the real program on a crafted frame, and the debug
//! record of the last decision (test mode).

use aya::programs::{SchedClassifier, TestRun, TestRunOptions, Xdp};

pub use crate::abi::{KernelDecision, TestRunOutcome};
use crate::abi::{KernelVerdict, ParseStatus};
use crate::attach::AttachPoint;
use crate::error::{Error, Result};
use crate::load::{Dataplane, PROG_TC, PROG_XDP};

/// XDP_PASS and TC_ACT_OK, from linux/bpf.h and linux/pkt_cls.h.
pub(crate) const XDP_PASS: u32 = 2;
pub(crate) const TC_ACT_OK: u32 = 0;

/// The `ctx_in` of a test run at XDP or tc reporting `ifindex` as the
/// ingress interface (empty for 0: the kernel's defaults). Shared with the
/// benchmark's floor program, which must see the same context.
pub(crate) fn test_ctx(hook: AttachPoint, frame_len: usize, ifindex: u32) -> Vec<u8> {
    if ifindex == 0 {
        return Vec::new();
    }
    match hook {
        // struct xdp_md: data, data_end, data_meta, ingress_ifindex,
        // rx_queue_index, egress_ifindex; data_end must equal the frame
        // length.
        AttachPoint::Xdp => [0, frame_len as u32, 0, ifindex, 0, 0]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect(),
        // struct __sk_buff up to ingress_ifindex (offset 36); the kernel
        // accepts a zero-padded prefix.
        _ => {
            let mut c = vec![0u8; 40];
            c[36..40].copy_from_slice(&ifindex.to_ne_bytes());
            c
        }
    }
}

impl Dataplane {
    /// Run the real program on `frame` with `BPF_PROG_TEST_RUN`, `repeat`
    /// times (counters and logs see every run). `ifindex`, when non-zero,
    /// is reported as the ingress interface and must exist in the caller's
    /// namespace (1 = loopback always does).
    pub fn test_run(
        &self,
        hook: AttachPoint,
        frame: &[u8],
        ifindex: u32,
        repeat: u32,
    ) -> Result<TestRunOutcome> {
        self.test_run_inner(hook, frame, ifindex, repeat, None)
            .map(|(o, _)| o)
    }

    /// [`Dataplane::test_run`] once, also returning the frame as the
    /// program left it (a REJECT answer, for instance: `retval` is then
    /// `TC_ACT_REDIRECT` (7) or `XDP_TX` (3)).
    pub fn test_run_output(
        &self,
        hook: AttachPoint,
        frame: &[u8],
        ifindex: u32,
    ) -> Result<(TestRunOutcome, Vec<u8>)> {
        let mut out = vec![0u8; frame.len() + 2048];
        let (o, n) = self.test_run_inner(hook, frame, ifindex, 1, Some(&mut out))?;
        out.truncate(n);
        Ok((o, out))
    }

    fn test_run_inner(
        &self,
        hook: AttachPoint,
        frame: &[u8],
        ifindex: u32,
        repeat: u32,
        data_out: Option<&mut [u8]>,
    ) -> Result<(TestRunOutcome, usize)> {
        if frame.len() < 14 {
            return Err(Error::FrameTooShort(frame.len()));
        }
        let name = match hook {
            AttachPoint::Xdp => PROG_XDP,
            AttachPoint::Tc => PROG_TC,
            AttachPoint::Netfilter => {
                return Err(Error::Netfilter(
                    "use test_run_netfilter for the netfilter program".into(),
                ))
            }
        };
        let prog = self.ebpf.program(name).ok_or(Error::Missing("program"))?;
        let ctx = test_ctx(hook, frame.len(), ifindex);
        let opts = TestRunOptions {
            data_in: Some(frame),
            ctx_in: (!ctx.is_empty()).then_some(&ctx[..]),
            data_out,
            repeat: repeat.max(1),
            ..TestRunOptions::default()
        };
        let r = match hook {
            AttachPoint::Xdp => <&Xdp>::try_from(prog)?.test_run(opts)?,
            _ => <&SchedClassifier>::try_from(prog)?.test_run(opts)?,
        };
        let passed = match hook {
            AttachPoint::Xdp => r.return_value == XDP_PASS,
            _ => r.return_value == TC_ACT_OK,
        };
        Ok((
            TestRunOutcome {
                retval: r.return_value,
                passed,
                duration: r.duration,
            },
            r.data_size_out as usize,
        ))
    }

    /// The last packet's key and decision. Only filled when loaded with
    /// [`LoadOptions::debug`](crate::LoadOptions::debug); `None` before the first packet.
    pub fn last_decision(&self) -> Result<Option<KernelDecision>> {
        let d = self.debug.get(&0, 0)?;
        if d.seq == 0 {
            return Ok(None);
        }
        Ok(Some(KernelDecision {
            key: d.key,
            status: ParseStatus::from_raw(d.status).unwrap_or(ParseStatus::Malformed),
            rule_id: d.rule_id,
            verdict: KernelVerdict::from_raw(d.verdict).unwrap_or(KernelVerdict::Drop),
            seq: d.seq,
            by_image: d.by_image != 0,
            nonterminal: d.nonterm[..(d.n_nonterm as usize).min(d.nonterm.len())].to_vec(),
            walk_err: d.walk_err,
            set_bits: u64::from(d.sets[0]) | u64::from(d.sets[1]) << 32,
            reject: d.reject as u8,
            ctstate: d.ctstate,
        }))
    }
}

impl Dataplane {
    /// Tests only: makes every stateful check see `ns` as the time (and
    /// `ns / (1e9 / HZ)` as jiffies, as `parapet_model::Clock` does); 0
    /// returns to the kernel's clocks.
    pub fn set_test_clock(&mut self, ns: u64) -> Result<()> {
        let map = self
            .ebpf
            .map_mut("parapet_test_clock")
            .ok_or(Error::Missing("map parapet_test_clock"))?;
        let mut clock: aya::maps::Array<_, u64> = aya::maps::Array::try_from(map)?;
        clock.set(0, ns, 0)?;
        Ok(())
    }

    /// The test clock's time (0: the kernel's clocks run).
    pub(crate) fn test_clock(&mut self) -> Result<u64> {
        let map = self
            .ebpf
            .map_mut("parapet_test_clock")
            .ok_or(Error::Missing("map parapet_test_clock"))?;
        let clock: aya::maps::Array<_, u64> = aya::maps::Array::try_from(map)?;
        Ok(clock.get(&0, 0)?)
    }
}
