//! What rules do: each rule's action (verdict, LOG flag, REJECT type),
//! the policy, the interim (proto, dport) classifier, and the REJECT
//! answers' rate limit.

use aya::maps::MapError;

use crate::abi::{KernelVerdict, LiteKey, LogLimit, RawAction, ACTION_F_LOG};
use crate::error::{Error, Result};
use crate::load::Dataplane;

/// GCRA parameters of a token bucket; rate 0 gives interval 0 (closed).
pub(crate) fn gcra(rate_per_sec: u32, burst: u32) -> LogLimit {
    if rate_per_sec == 0 {
        return LogLimit::default();
    }
    let interval_ns = 1_000_000_000 / u64::from(rate_per_sec);
    LogLimit {
        interval_ns: interval_ns.max(1),
        tolerance_ns: interval_ns * u64::from(burst.max(1) - 1),
        tat_ns: 0,
    }
}

impl Dataplane {
    pub(crate) fn check_rule(&self, rule: u32) -> Result<()> {
        if rule > self.max_rules {
            return Err(Error::RuleOutOfRange {
                rule,
                max: self.max_rules,
            });
        }
        Ok(())
    }

    /// Set what rule `rule` does when it decides a packet (0 = the policy).
    pub fn set_action(&mut self, rule: u32, verdict: KernelVerdict, log: bool) -> Result<()> {
        self.check_rule(rule)?;
        let a = RawAction {
            verdict: verdict as u8,
            flags: if log { ACTION_F_LOG } else { 0 },
            reject: 0,
            _pad: 0,
        };
        self.actions.set(rule, a, 0)?;
        Ok(())
    }

    /// [`Dataplane::set_action`] for a REJECT with a `--reject-with` type
    /// (`abi::reject::*`, from `parapet_image::reject::reject_code`); used
    /// when the interim classifier decides.
    pub fn set_action_reject(&mut self, rule: u32, reject_type: u8, log: bool) -> Result<()> {
        self.check_rule(rule)?;
        let a = RawAction {
            verdict: KernelVerdict::Reject as u8,
            flags: if log { ACTION_F_LOG } else { 0 },
            reject: reject_type,
            _pad: 0,
        };
        self.actions.set(rule, a, 0)?;
        Ok(())
    }

    /// The policy: what happens when no rule matches.
    pub fn set_policy(&mut self, verdict: KernelVerdict) -> Result<()> {
        self.set_action(0, verdict, false)
    }

    /// Interim classifier: packets of `proto` to `dport` are decided by
    /// `rule` (`dport` 0 = any port of `proto`; `proto` 0 and `dport` 0 =
    /// anything). Lookup order: exact, then any-port, then anything, then
    /// the policy. Replaced by the image walker once it lands.
    pub fn set_lite_rule(&mut self, proto: u8, dport: u16, rule: u32) -> Result<()> {
        self.check_rule(rule)?;
        let k = LiteKey {
            proto,
            _pad: 0,
            dport,
        };
        self.lite.insert(k, rule, 0)?;
        Ok(())
    }

    /// Remove an interim-classifier entry (absent entries are fine).
    pub fn remove_lite_rule(&mut self, proto: u8, dport: u16) -> Result<()> {
        let k = LiteKey {
            proto,
            _pad: 0,
            dport,
        };
        match self.lite.remove(&k) {
            Ok(()) | Err(MapError::KeyNotFound) => Ok(()),
            // aya reports a missing key on delete as the raw ENOENT
            Err(MapError::SyscallError(e)) if e.io_error.raw_os_error() == Some(libc::ENOENT) => {
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Limit REJECT answers (TCP resets, ICMP errors) to `rate_per_sec`
    /// with bursts of `burst`, over all CPUs and rules together; the rest
    /// are dropped silently ([`Stat::RejectLimited`](crate::Stat::RejectLimited)). Rate 0: never
    /// answer. Loading sets 1000/s, burst 50.
    pub fn set_reject_rate(&mut self, rate_per_sec: u32, burst: u32) -> Result<()> {
        self.reject_limit.set(0, gcra(rate_per_sec, burst), 0)?;
        Ok(())
    }
}
