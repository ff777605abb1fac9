//! What the program reports: per-rule counters, dataplane-wide statistics,
//! and the rate-limited LOG ring buffer.

use aya::maps::MapError;

use crate::abi::{
    Counter, KernelVerdict, PacketKey, RawLogEvent, Stat, HOOK_IFACES, HOOK_NF_POSTROUTING,
    HOOK_NF_PREROUTING, HOOK_ROWS, HOOK_TC, STAT_MAX,
};
use crate::actions::gcra;
use crate::attach::AttachPoint;
use crate::error::Result;
use crate::load::Dataplane;

/// One ring-buffer log event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogEvent {
    /// CLOCK_MONOTONIC nanoseconds at the hook.
    pub ts_ns: u64,
    /// Rule that matched (0 = policy).
    pub rule_id: u32,
    /// Its verdict.
    pub verdict: KernelVerdict,
    /// Where the program saw the packet.
    pub hook: AttachPoint,
    /// The packet.
    pub key: PacketKey,
}

/// Dataplane-wide statistics, summed over CPUs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats(pub Vec<u64>);

impl Stats {
    /// One statistic.
    pub fn get(&self, s: Stat) -> u64 {
        self.0.get(s as usize).copied().unwrap_or(0)
    }
}

/// What one hook saw on one interface, summed over CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HookCount {
    /// `abi::HOOK_XDP` .. `abi::HOOK_NF_POSTROUTING`.
    pub hook: u8,
    /// The interface (the output one at OUTPUT); 0: every interface whose
    /// index is [`HOOK_IFACES`] or more.
    pub ifindex: u32,
    /// Packets the hook's program ran on.
    pub packets: u64,
    /// Their bytes, counted as the rule counters count them.
    pub bytes: u64,
    /// Those it did not accept.
    pub dropped: u64,
}

impl Dataplane {
    /// Packets and bytes rule `rule` decided, summed over CPUs.
    pub fn counter(&self, rule: u32) -> Result<Counter> {
        self.check_rule(rule)?;
        let per_cpu = self.counters.get(&rule, 0)?;
        Ok(per_cpu.iter().fold(Counter::default(), |a, c| Counter {
            packets: a.packets + c.packets,
            bytes: a.bytes + c.bytes,
        }))
    }

    /// Zero every rule's counters (all CPUs). An increment racing with the
    /// reset on another CPU may survive it or be lost.
    pub fn reset_counters(&mut self) -> Result<()> {
        let cpu_err = |io_error| {
            MapError::SyscallError(aya::sys::SyscallError {
                call: "nr_cpus",
                io_error,
            })
        };
        let cpus = aya::util::nr_cpus().map_err(|(_, e)| cpu_err(e))?;
        for rule in 0..=self.max_rules {
            let zeros = aya::maps::PerCpuValues::try_from(vec![Counter::default(); cpus])
                .map_err(cpu_err)?;
            self.counters.set(rule, zeros, 0)?;
        }
        Ok(())
    }

    /// Dataplane statistics, summed over CPUs.
    pub fn stats(&self) -> Result<Stats> {
        let mut v = Vec::with_capacity(STAT_MAX as usize);
        for i in 0..STAT_MAX {
            v.push(self.stats.get(&i, 0)?.iter().sum());
        }
        Ok(Stats(v))
    }

    /// Per hook and interface: the counts of every hook for the interfaces
    /// `ifindexes` (those below [`HOOK_IFACES`]) and for the column of all
    /// larger indices, leaving out what saw no packet. One map lookup per
    /// hook and interface asked for.
    pub fn hook_counts(&self, ifindexes: &[u32]) -> Result<Vec<HookCount>> {
        let mut cols: Vec<u32> = ifindexes
            .iter()
            .copied()
            .filter(|&i| i < HOOK_IFACES)
            .chain([0])
            .collect();
        cols.sort_unstable();
        cols.dedup();
        let mut out = Vec::new();
        for row in 0..HOOK_ROWS {
            for &col in &cols {
                let per_cpu = self.hook_stats.get(&(row * HOOK_IFACES + col), 0)?;
                let sum = per_cpu.iter().fold(HookCount::default(), |a, c| HookCount {
                    packets: a.packets + c.packets,
                    bytes: a.bytes + c.bytes,
                    dropped: a.dropped + c.dropped,
                    ..a
                });
                if sum.packets > 0 {
                    out.push(HookCount {
                        hook: (row + 1) as u8,
                        ifindex: col,
                        ..sum
                    });
                }
            }
        }
        Ok(out)
    }

    /// Limit log events of `rule` to `rate_per_sec` with bursts of `burst`.
    /// `rate_per_sec` 0 disables logging for the rule. The limit holds
    /// across all CPUs together.
    pub fn set_log_rate(&mut self, rule: u32, rate_per_sec: u32, burst: u32) -> Result<()> {
        self.check_rule(rule)?;
        self.log_limits.set(rule, gcra(rate_per_sec, burst), 0)?;
        Ok(())
    }

    /// Take up to `max` pending log events without blocking. The ring
    /// buffer's fd ([`Dataplane::log_fd`]) becomes readable when events wait.
    pub fn poll_log(&mut self, max: usize) -> Vec<LogEvent> {
        let mut out = Vec::new();
        while out.len() < max {
            let Some(item) = self.log.next() else { break };
            if item.len() < std::mem::size_of::<RawLogEvent>() {
                continue; // cannot happen with a matching object; skip
            }
            // SAFETY: the record is at least size_of::<RawLogEvent>() bytes
            // and RawLogEvent is plain old data; read_unaligned makes no
            // alignment assumption about the ring buffer memory.
            let raw: RawLogEvent = unsafe { std::ptr::read_unaligned(item.as_ptr().cast()) };
            out.push(LogEvent {
                ts_ns: raw.ts_ns,
                rule_id: raw.rule_id,
                verdict: KernelVerdict::from_raw(raw.verdict.into()).unwrap_or(KernelVerdict::Drop),
                hook: match raw.hook {
                    HOOK_TC => AttachPoint::Tc,
                    HOOK_NF_PREROUTING..=HOOK_NF_POSTROUTING => AttachPoint::Netfilter,
                    _ => AttachPoint::Xdp,
                },
                key: raw.key,
            });
        }
        out
    }

    /// The log ring buffer's fd, for epoll.
    pub fn log_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.log.as_fd()
    }
}
