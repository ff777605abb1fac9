//! What the program reports: per-rule counters, dataplane-wide statistics,
//! and the rate-limited LOG ring buffer.

use std::os::fd::AsFd;

use aya::maps::{IterableMap, MapError};

use crate::abi::{
    Counter, KernelVerdict, PacketKey, RawLogEvent, Stat, HOOK_IFACES, HOOK_NF_POSTROUTING,
    HOOK_NF_PREROUTING, HOOK_ROWS, HOOK_TC, STAT_MAX,
};
use crate::actions::gcra;
use crate::attach::AttachPoint;
use crate::bpf_sys::{map_lookup_batch, map_update_batch};
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

/// Rules per batch call of [`Dataplane::counter_range`] and
/// [`Dataplane::reset_counters`]: 8,192 rules of two CPUs are 256 KiB of
/// values.
const COUNTER_BATCH: u64 = 8192;

/// A [`Counter`] as a per-CPU map stores it, per CPU: two u64s (already
/// a multiple of 8 bytes, so no rounding).
const COUNTER_BYTES: usize = std::mem::size_of::<Counter>();

fn cpu_err(io_error: std::io::Error) -> MapError {
    MapError::SyscallError(aya::sys::SyscallError {
        call: "nr_cpus",
        io_error,
    })
}

/// The possible CPUs, whose count sizes a per-CPU map's values.
fn nr_cpus() -> Result<usize> {
    Ok(aya::util::nr_cpus().map_err(|(_, e)| cpu_err(e))?)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[at..at + 8]);
    u64::from_ne_bytes(v)
}

/// Whether a batch lookup's keys are `first, first + 1, …`.
fn keys_follow(keys: &[u8], first: u32) -> bool {
    keys.chunks_exact(4)
        .enumerate()
        .all(|(i, k)| u32::from_ne_bytes([k[0], k[1], k[2], k[3]]) == first + i as u32)
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

    /// Packets and bytes of rules `first..first + count` (0 = the policy),
    /// summed over CPUs; ids past the program's `max_rules` are left out
    /// (the result is shorter). One `BPF_MAP_LOOKUP_BATCH` per
    /// [`COUNTER_BATCH`] rules instead of a lookup each: at 100,000 rules
    /// that is what `stats` and a scrape wait for (and the daemon's state
    /// lock with them); a kernel without batch lookups gets one each.
    pub fn counter_range(&self, first: u32, count: usize) -> Result<Vec<Counter>> {
        let end = (u64::from(first) + count as u64).min(u64::from(self.max_rules) + 1);
        let mut out = Vec::with_capacity(end.saturating_sub(u64::from(first)) as usize);
        let cpus = nr_cpus()?;
        let fd = self.counters.map().fd().as_fd();
        let mut at = u64::from(first);
        while at < end {
            let n = (end - at).min(COUNTER_BATCH) as u32;
            let mut keys = vec![0u8; n as usize * 4];
            let mut values = vec![0u8; n as usize * cpus * COUNTER_BYTES];
            let read = match map_lookup_batch(fd, at as u32, &mut keys, &mut values, n) {
                Ok(read) if read == n && keys_follow(&keys, at as u32) => read,
                // no batch lookups here (or an answer not in index order):
                // one lookup per rule
                _ => {
                    for rule in at as u32..end as u32 {
                        out.push(self.counter(rule)?);
                    }
                    return Ok(out);
                }
            };
            for v in values
                .chunks_exact(cpus * COUNTER_BYTES)
                .take(read as usize)
            {
                out.push(
                    v.chunks_exact(COUNTER_BYTES)
                        .fold(Counter::default(), |a, c| Counter {
                            packets: a.packets + u64_at(c, 0),
                            bytes: a.bytes + u64_at(c, 8),
                        }),
                );
            }
            at += u64::from(read);
        }
        Ok(out)
    }

    /// Zero every rule's counters (all CPUs): one `BPF_MAP_UPDATE_BATCH`
    /// per [`COUNTER_BATCH`] rules (one update each where the kernel has
    /// none). An increment racing with the reset on another CPU may
    /// survive it or be lost.
    pub fn reset_counters(&mut self) -> Result<()> {
        let cpus = nr_cpus()?;
        let total = u64::from(self.max_rules) + 1;
        let mut at = 0u64;
        while at < total {
            let n = (total - at).min(COUNTER_BATCH) as u32;
            let keys: Vec<u8> = (at as u32..at as u32 + n)
                .flat_map(u32::to_ne_bytes)
                .collect();
            let zeros = vec![0u8; n as usize * cpus * COUNTER_BYTES];
            let fd = self.counters.map().fd().as_fd();
            if map_update_batch(fd, &keys, &zeros, n).is_err() {
                for rule in at as u32..at as u32 + n {
                    let zeros = aya::maps::PerCpuValues::try_from(vec![Counter::default(); cpus])
                        .map_err(cpu_err)?;
                    self.counters.set(rule, zeros, 0)?;
                }
            }
            at += u64::from(n);
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
