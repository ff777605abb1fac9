//! `-m hashlimit` (`xt_hashlimit.c`, revisions 2 and 3, packet mode): a
//! token bucket per key — the packet's masked addresses and ports, as
//! `--hashlimit-mode` chooses — in a named table shared by every rule
//! naming it, with the kernel's arithmetic for every engine.
//!
//! The arithmetic, as the kernel's (revision ≥ 2):
//! - a rule stores `avg = 1 000 000 × unit_seconds / rate`
//!   (`XT_HASHLIMIT_SCALE_v2`) and `burst` (default 5);
//! - `CREDITS_PER_JIFFY` is the largest power of two not above
//!   `u64::MAX / (HZ × 86400)`, and `user2credits(x) = x × (HZ × cpj /
//!   1 000 000)` (the constants divided first, in `u64`);
//! - a new entry starts with `credit = cap = user2credits(avg × burst)` and
//!   costs `user2credits(avg)` per packet;
//! - a packet of a known entry first adds `(now − prev) × cpj` credits
//!   (wrapping `u64`, as the kernel's), capped (nothing when `now == prev`);
//! - the packet is under the limit when `credit ≥ cost` (which is then
//!   spent): `--hashlimit-upto` matches then, `--hashlimit-above` otherwise.
//!
//! Entries expire `--hashlimit-htable-expire` ms after their last packet
//! (default: the rate's unit, as iptables sets it). The kernel removes them
//! in a garbage-collection run every `--hashlimit-htable-gcinterval` ms;
//! here an entry is gone as soon as it has expired, so the two can differ
//! for a packet that arrives within one gc interval after the expiry (a
//! documented rounding, `docs/syntax.md`). A table holds at most
//! `--hashlimit-htable-max` entries (default `8 × size`, with the kernel's
//! default size 8192 of a machine with more than 1 GiB); a new key beyond
//! that makes the kernel drop the packet, which is modelled as "over the
//! limit" (`upto` fails, `above` matches — the same fate for the usual
//! accept-under / drop-over rules).
//!
//! Byte mode (`--hashlimit-upto 1kb/s`) and `--hashlimit-rate-match` are
//! refused by the parser.

use crate::field::Family;
use crate::packet::Packet;
use crate::recent::table_id;
use crate::time_unit::TimeUnit;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// `XT_HASHLIMIT_SCALE_v2`: `avg` is seconds between packets × this.
pub const SCALE: u64 = 1_000_000;
/// iptables' default `--hashlimit-burst`.
pub const DEFAULT_BURST: u32 = 5;
/// iptables' largest `--hashlimit-burst` (`XT_HASHLIMIT_BURST_MAX` of
/// revision ≥ 2; revision 1's was 10,000). The image row holds 24 bits.
pub const MAX_BURST: u32 = 1_000_000;
/// iptables' default `--hashlimit-htable-gcinterval` (ms).
pub const DEFAULT_GCINTERVAL: u32 = 1000;
/// The kernel's default table size on a machine with more than 1 GiB.
pub const DEFAULT_SIZE: u32 = 8192;
/// `--hashlimit-mode` bits, the kernel's values.
pub const MODE_DSTIP: u8 = 1;
/// `dstport`.
pub const MODE_DSTPORT: u8 = 2;
/// `srcip`.
pub const MODE_SRCIP: u8 = 4;
/// `srcport`.
pub const MODE_SRCPORT: u8 = 8;
/// The largest `HZ × cpj / SCALE` of the kernels' `HZ` values (100, 250,
/// 300, 1000): the parser refuses a rate and burst whose credits would
/// overflow for it, as the kernel refuses them (`-ERANGE`).
pub const MAX_CREDIT_FACTOR: u64 = 164_926_744;

/// One `-m hashlimit` match.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Hashlimit {
    /// `--hashlimit-name`: the table.
    pub name: String,
    /// Packets per `per`.
    pub rate: u32,
    /// The rate's unit.
    pub per: TimeUnit,
    /// `--hashlimit-burst`.
    pub burst: u32,
    /// `--hashlimit-above` (else `--hashlimit-upto`).
    pub above: bool,
    /// `--hashlimit-mode`: `MODE_*` bits.
    pub mode: u8,
    /// `--hashlimit-srcmask` (prefix length; 32 or 128 by default).
    pub srcmask: u8,
    /// `--hashlimit-dstmask`.
    pub dstmask: u8,
    /// `--hashlimit-htable-size` (0: the kernel's default).
    pub size: u32,
    /// `--hashlimit-htable-max` (0: `8 × size`).
    pub max: u32,
    /// `--hashlimit-htable-gcinterval` (ms).
    pub gcinterval: u32,
    /// `--hashlimit-htable-expire` (ms).
    pub expire: u32,
}

impl Hashlimit {
    /// A `--hashlimit-upto RATE/PER` on table `name` of a `family` rule,
    /// with iptables' defaults.
    pub fn new(name: &str, rate: u32, per: TimeUnit, family: Family) -> Hashlimit {
        let full = if family == Family::V4 { 32 } else { 128 };
        Hashlimit {
            name: name.to_string(),
            rate,
            per,
            burst: DEFAULT_BURST,
            above: false,
            mode: 0,
            srcmask: full,
            dstmask: full,
            size: 0,
            max: 0,
            gcinterval: DEFAULT_GCINTERVAL,
            expire: per.seconds() * 1000,
        }
    }

    /// `avg`: seconds between packets × [`SCALE`] (0 when the rate is
    /// faster than the scale can say; the parser refuses that).
    pub fn avg(&self) -> u64 {
        SCALE * self.per.seconds() as u64 / self.rate.max(1) as u64
    }

    /// The table's number in images and BPF maps ([`table_id`] of the
    /// name).
    pub fn table_id(&self) -> u32 {
        table_id(&self.name)
    }

    /// The entries a table holds at most (the kernel's `cfg.max` after
    /// `htable_create`).
    pub fn capacity(&self) -> u32 {
        let size = if self.size == 0 {
            DEFAULT_SIZE
        } else {
            self.size
        };
        match self.max {
            0 => size.saturating_mul(8),
            m => m.max(size),
        }
    }

    /// The `-m hashlimit` options in iptables-save's order and spelling.
    pub fn options(&self, family: Family) -> String {
        let full = if family == Family::V4 { 32 } else { 128 };
        let unit = match self.per {
            TimeUnit::Second => "sec",
            TimeUnit::Minute => "min",
            TimeUnit::Hour => "hour",
            TimeUnit::Day => "day",
        };
        let dir = if self.above { "above" } else { "upto" };
        let mut out = format!(
            "--hashlimit-{dir} {}/{unit} --hashlimit-burst {}",
            self.rate, self.burst
        );
        if self.mode != 0 {
            out.push_str(" --hashlimit-mode ");
            out.push_str(&mode_names(self.mode).join(","));
        }
        out.push_str(&format!(" --hashlimit-name {}", self.name));
        if self.size != 0 {
            out.push_str(&format!(" --hashlimit-htable-size {}", self.size));
        }
        if self.max != 0 {
            out.push_str(&format!(" --hashlimit-htable-max {}", self.max));
        }
        if self.gcinterval != DEFAULT_GCINTERVAL {
            out.push_str(&format!(
                " --hashlimit-htable-gcinterval {}",
                self.gcinterval
            ));
        }
        if self.expire != self.per.seconds() * 1000 {
            out.push_str(&format!(" --hashlimit-htable-expire {}", self.expire));
        }
        if self.srcmask != full {
            out.push_str(&format!(" --hashlimit-srcmask {}", self.srcmask));
        }
        if self.dstmask != full {
            out.push_str(&format!(" --hashlimit-dstmask {}", self.dstmask));
        }
        out
    }

    /// The key of `pkt` in this match's table.
    pub fn key(&self, pkt: &Packet) -> HashlimitKey {
        hashlimit_key(
            pkt.family,
            self.mode,
            self.srcmask,
            self.dstmask,
            [pkt.src, pkt.dst],
            [pkt.sport, pkt.dport],
        )
    }
}

/// `--hashlimit-mode` names in iptables-save's order.
pub fn mode_names(mode: u8) -> Vec<&'static str> {
    [
        (MODE_SRCIP, "srcip"),
        (MODE_SRCPORT, "srcport"),
        (MODE_DSTIP, "dstip"),
        (MODE_DSTPORT, "dstport"),
    ]
    .into_iter()
    .filter(|(b, _)| mode & b != 0)
    .map(|(_, n)| n)
    .collect()
}

/// An entry's key: family, the masked source and destination (0 unless the
/// mode hashes them) and the ports (likewise).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct HashlimitKey {
    /// 4 or 6.
    pub family: u8,
    /// Source, masked.
    pub src: u128,
    /// Destination, masked.
    pub dst: u128,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
}

/// `hashlimit_init_dst`: the key of a packet with addresses `addr` (source,
/// destination) and ports `ports` (0 for protocols without ports).
pub fn hashlimit_key(
    family: Family,
    mode: u8,
    srcmask: u8,
    dstmask: u8,
    addr: [u128; 2],
    ports: [u16; 2],
) -> HashlimitKey {
    let (fam, bits) = match family {
        Family::V4 => (4, 32u32),
        Family::V6 => (6, 128u32),
    };
    let mask = |a: u128, len: u8| {
        let len = (len as u32).min(bits);
        if len == 0 {
            0
        } else {
            a & ((u128::MAX >> (128 - bits)) & !((1u128 << (bits - len)) - 1))
        }
    };
    HashlimitKey {
        family: fam,
        src: if mode & MODE_SRCIP != 0 {
            mask(addr[0], srcmask)
        } else {
            0
        },
        dst: if mode & MODE_DSTIP != 0 {
            mask(addr[1], dstmask)
        } else {
            0
        },
        sport: if mode & MODE_SRCPORT != 0 {
            ports[0]
        } else {
            0
        },
        dport: if mode & MODE_DSTPORT != 0 {
            ports[1]
        } else {
            0
        },
    }
}

/// `CREDITS_PER_JIFFY` of revision ≥ 2 for a kernel of `hz`: the largest
/// power of two not above `u64::MAX / (hz × 86400)`.
pub fn credits_per_jiffy(hz: u32) -> u64 {
    let max = u64::MAX / (hz.max(1) as u64 * 86_400);
    1 << (63 - max.leading_zeros())
}

/// `user2credits` of revision ≥ 2 (`u64`, the constants divided first).
pub fn user2credits(user: u64, hz: u32) -> u64 {
    let hz_cpj = (hz.max(1) as u64).wrapping_mul(credits_per_jiffy(hz));
    if SCALE >= hz_cpj {
        user / (SCALE / hz_cpj)
    } else {
        user.wrapping_mul(hz_cpj / SCALE)
    }
}

/// `msecs_to_jiffies`: rounded up.
pub fn msecs_to_jiffies(ms: u32, hz: u32) -> u64 {
    (ms as u64 * hz as u64).div_ceil(1000)
}

/// One entry's bucket (`struct dsthash_ent`'s rate info).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct HashlimitBucket {
    /// Jiffies of the last packet.
    pub prev: u64,
    /// Credits left.
    pub credit: u64,
    /// Jiffies at which the entry expires.
    pub expires: u64,
}

impl HashlimitBucket {
    /// `rateinfo_init`: a new entry at `now`.
    pub fn new(avg: u64, burst: u32, expire_ms: u32, hz: u32, now: u64) -> HashlimitBucket {
        HashlimitBucket {
            prev: now,
            credit: user2credits(avg.wrapping_mul(burst as u64), hz),
            expires: now + msecs_to_jiffies(expire_ms, hz),
        }
    }

    /// An existing entry seen at `now`: its expiry moves and
    /// `rateinfo_recalc` adds the credits of the time since the last packet.
    pub fn recalc(&mut self, avg: u64, burst: u32, expire_ms: u32, hz: u32, now: u64) {
        self.expires = now + msecs_to_jiffies(expire_ms, hz);
        let delta = now.wrapping_sub(self.prev);
        if delta == 0 {
            return;
        }
        self.prev = now;
        let cap = user2credits(avg.wrapping_mul(burst as u64), hz);
        self.credit = self
            .credit
            .wrapping_add(delta.wrapping_mul(credits_per_jiffy(hz)));
        if self.credit > cap {
            self.credit = cap;
        }
    }

    /// Spends one packet's cost when there is enough: true when under the
    /// limit.
    pub fn spend(&mut self, avg: u64, hz: u32) -> bool {
        let cost = user2credits(avg, hz);
        if self.credit >= cost {
            self.credit -= cost;
            return true;
        }
        false
    }
}

/// The kernel's `time_after_eq(a, b)` on jiffies.
pub fn time_after_eq(a: u64, b: u64) -> bool {
    (a.wrapping_sub(b) as i64) >= 0
}

/// The hashlimit tables: (name, family) → key → bucket.
#[derive(Clone, Debug, Default)]
pub struct HashlimitTables {
    tables: HashMap<(String, u8), HashMap<HashlimitKey, HashlimitBucket>>,
}

/// One packet at jiffy `now` on a table's entry for its key (`None`: no
/// live entry; a new one is made): true when under the limit. The step
/// every engine's tables share.
pub fn hashlimit_step(
    entry: &mut Option<HashlimitBucket>,
    avg: u64,
    burst: u32,
    expire_ms: u32,
    hz: u32,
    now: u64,
) -> bool {
    match entry {
        Some(b) if !time_after_eq(now, b.expires) => {
            b.recalc(avg, burst, expire_ms, hz, now);
            b.spend(avg, hz)
        }
        _ => {
            let mut b = HashlimitBucket::new(avg, burst, expire_ms, hz, now);
            let under = b.spend(avg, hz);
            *entry = Some(b);
            under
        }
    }
}

impl HashlimitTables {
    /// `hashlimit_mt` for the packet `pkt` at jiffy `now`: true when the
    /// match answers yes.
    pub fn check(&mut self, h: &Hashlimit, pkt: &Packet, now: u64, hz: u32) -> bool {
        let key = h.key(pkt);
        let table = self.tables.entry((h.name.clone(), key.family)).or_default();
        let mut entry = table.remove(&key);
        if entry.is_none_or(|b| time_after_eq(now, b.expires)) {
            entry = None;
            if table.len() >= h.capacity() as usize {
                table.retain(|_, b| !time_after_eq(now, b.expires));
            }
            if table.len() >= h.capacity() as usize {
                // The kernel drops the packet: "over the limit".
                return h.above;
            }
        }
        let under = hashlimit_step(&mut entry, h.avg(), h.burst, h.expire, hz, now);
        if let Some(b) = entry {
            table.insert(key, b);
        }
        under != h.above
    }

    /// The bucket of `key` in table `name`, if any.
    pub fn bucket(&self, name: &str, key: &HashlimitKey) -> Option<&HashlimitBucket> {
        self.tables.get(&(name.to_string(), key.family))?.get(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credits_per_jiffy_of_common_hz() {
        // POW2_BELOW64(0xFFFFFFFFFFFFFFFF / (HZ*86400))
        assert_eq!(credits_per_jiffy(250), 1 << 39);
        assert_eq!(credits_per_jiffy(1000), 1 << 37);
        assert_eq!(credits_per_jiffy(100), 1 << 40);
        let worst = [100, 250, 300, 1000]
            .iter()
            .map(|&hz| hz as u64 * credits_per_jiffy(hz) / SCALE)
            .max();
        assert_eq!(worst, Some(MAX_CREDIT_FACTOR));
    }

    fn pkt(src: u32, dport: u16) -> Packet {
        Packet::v4(src, 0x0a00_0001, 17, 1000, dport)
    }

    #[test]
    fn burst_per_key_then_the_rate() {
        let mut h = Hashlimit::new("t", 1, TimeUnit::Second, Family::V4);
        h.burst = 3;
        h.mode = MODE_SRCIP;
        h.expire = 10_000;
        let mut t = HashlimitTables::default();
        let hz = 250;
        // 5 packets of each of two sources at once: 3 each pass.
        let hits: Vec<bool> = (0..10)
            .map(|i| t.check(&h, &pkt(1 + (i % 2), 53), 1000, hz))
            .collect();
        assert_eq!(hits.iter().filter(|&&x| x).count(), 6);
        // one second later one more each
        assert!(t.check(&h, &pkt(1, 53), 1250, hz));
        assert!(!t.check(&h, &pkt(1, 53), 1250, hz));
    }

    #[test]
    fn above_inverts_and_expiry_refills() {
        let mut h = Hashlimit::new("t", 1, TimeUnit::Minute, Family::V4);
        h.burst = 1;
        h.above = true;
        h.expire = 2000;
        let mut t = HashlimitTables::default();
        assert!(!t.check(&h, &pkt(1, 1), 0, 250));
        assert!(t.check(&h, &pkt(1, 1), 100, 250));
        // idle past the expiry (2 s = 500 jiffies): a new, full entry
        assert!(!t.check(&h, &pkt(1, 1), 700, 250));
    }

    #[test]
    fn capacity_full_answers_over() {
        let mut h = Hashlimit::new("t", 1, TimeUnit::Second, Family::V4);
        h.mode = MODE_SRCIP;
        h.size = 2;
        h.max = 2;
        let mut t = HashlimitTables::default();
        assert!(t.check(&h, &pkt(1, 1), 0, 250));
        assert!(t.check(&h, &pkt(2, 1), 0, 250));
        assert!(!t.check(&h, &pkt(3, 1), 0, 250));
    }

    #[test]
    fn masks_group_addresses() {
        let k = hashlimit_key(
            Family::V4,
            MODE_SRCIP | MODE_DSTPORT,
            24,
            32,
            [0x0a01_0203, 5],
            [7, 80],
        );
        assert_eq!((k.src, k.dst, k.sport, k.dport), (0x0a01_0200, 0, 0, 80));
        let k6 = hashlimit_key(Family::V6, MODE_DSTIP, 128, 64, [1, u128::MAX], [0, 0]);
        assert_eq!(k6.dst, u128::MAX << 64);
    }
}
