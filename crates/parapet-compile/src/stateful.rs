//! The stateful table of an image, evaluated: per row a bucket, checked with
//! the model's kernel arithmetic (`parapet_model::XtBucket`/`NftBucket`)
//! from the row's words — the words the BPF walker reads
//! (`bpf/lib/stateful.h`), so the two walkers cannot differ in data.

use parapet_image::{hw, stateful as st, Image, KeyWords};
use parapet_model::{
    hashlimit_key, hashlimit_step, masked, recent_seen_ttl, Bucket, Clock, DynsetCheck, DynsetOp,
    DynsetTables, ElementLimit, Family, HashlimitBucket, HashlimitKey, NftBucket, Quota,
    RandomWords, RecentCheck, RecentCommand, RecentTables, Statistic, TimeWindow, XtBucket,
};
use std::collections::HashMap;

/// The buckets of one image's stateful rows and the clock the caller moves.
/// A new image starts with full buckets (the kernel's rules start full when
/// loaded).
#[derive(Clone, Debug)]
pub struct ImageState {
    /// The current time.
    pub clock: Clock,
    loaded: Clock,
    buckets: Vec<Option<Bucket>>,
    /// The `-m recent` tables: the same tables whatever the row.
    pub recent: RecentTables,
    /// The `-m hashlimit` tables: (table id, key) → bucket, as the BPF
    /// map's (no per-table capacity: the map's is global).
    pub hashlimit: HashMap<(u32, HashlimitKey), HashlimitBucket>,
    /// The nft dynamic sets: the same sets whatever the row. A set's
    /// declared elements are not in the image: the caller seeds them
    /// (`DynsetTables::seed`), as parapetd seeds the BPF map
    /// (`Dataplane::seed_dynsets`).
    pub dynset: DynsetTables,
    /// Time windows' wall clock: UTC nanoseconds since the epoch are
    /// `clock.ns + wall_offset_ns` (the BPF map `parapet_wall_clock`'s
    /// boot → UTC offset). 0, as in the kernel before the loader wrote
    /// it: time windows are closed.
    pub wall_offset_ns: i64,
    /// The kernel's `sys_tz` for `--kerneltz` windows: minutes west of UTC.
    pub minutes_west: i32,
    /// The random words `-m statistic --mode random` reads (the BPF
    /// walker's are `bpf_get_prandom_u32`'s).
    pub random: RandomWords,
}

impl ImageState {
    /// State for an image loaded at `clock`.
    pub fn new(image: &Image, clock: Clock) -> ImageState {
        ImageState {
            clock,
            loaded: clock,
            buckets: vec![None; image.header(hw::N_STATEFUL) as usize],
            recent: RecentTables::default(),
            hashlimit: HashMap::new(),
            dynset: DynsetTables::default(),
            wall_offset_ns: 0,
            minutes_west: 0,
            random: RandomWords::default(),
        }
    }

    /// The wall-clock time now, in UTC seconds since the epoch, as the BPF
    /// walker computes it (`bpf/lib/time_window.h`); `None` when the
    /// offset was never set or the time is before 1970.
    pub fn wall_secs(&self) -> Option<i64> {
        let ns = self.clock.ns.wrapping_add(self.wall_offset_ns as u64) as i64;
        (self.wall_offset_ns != 0 && ns >= 0).then_some(ns / 1_000_000_000)
    }

    /// Moves the clock to `ns` (never backwards).
    pub fn set_ns(&mut self, ns: u64) {
        self.clock.ns = self.clock.ns.max(ns);
    }

    /// Checks row `row` of `image` for the packet `key` now. An image the
    /// state was not made for (a row beyond it) fails closed: no match.
    pub fn check(&mut self, image: &Image, row: u32, key: &KeyWords) -> bool {
        let w = image.words();
        let Some(slot) = self.buckets.get_mut(row as usize) else {
            return false;
        };
        let r = &w[image.header(hw::STATEFUL_OFF) as usize + row as usize * st::ROW_WORDS..]
            [..st::ROW_WORDS];
        let u64_at = |i: usize| r[i] as u64 | (r[i + 1] as u64) << 32;
        let (now, loaded) = (self.clock, self.loaded);
        match r[1] & 0xff {
            st::XT_LIMIT => {
                let (avg, burst) = (r[2], r[3]);
                let b = slot.get_or_insert_with(|| {
                    Bucket::Xt(XtBucket::full(avg, burst, loaded.hz, loaded.jiffies()))
                });
                match b {
                    Bucket::Xt(x) => x.admit(avg, burst, now.hz, now.jiffies()),
                    Bucket::Nft(_) | Bucket::Quota(_) | Bucket::Nth(_) => false,
                }
            }
            st::NFT_LIMIT => {
                let (cost, max) = (u64_at(2), u64_at(4));
                let over = r[1] & st::F_OVER != 0;
                let b = slot.get_or_insert_with(|| Bucket::Nft(NftBucket::full(max, loaded.ns)));
                match b {
                    Bucket::Nft(n) => n.admit(cost, max, over, now.ns),
                    Bucket::Xt(_) | Bucket::Quota(_) | Bucket::Nth(_) => false,
                }
            }
            st::RECENT => {
                let Some(command) = RecentCommand::from_code((r[1] >> st::RECENT_CMD_SHIFT) & 3)
                else {
                    return false;
                };
                let c = RecentCheck {
                    table: r[2],
                    command,
                    invert: r[1] & st::F_INVERT != 0,
                    seconds: r[3],
                    hitcount: r[4] & 0xff,
                    reap: r[1] & st::F_REAP != 0,
                    rttl: r[1] & st::F_RTTL != 0,
                };
                // Field ids 0 (family), 1 (source), 2 (destination), 8
                // and 9 (input and output interface), 12 (TTL).
                let family = match key.value(0) {
                    4 => Family::V4,
                    6 => Family::V6,
                    _ => return false,
                };
                let addr = key.value(if r[1] & st::F_RDEST != 0 { 2 } else { 1 });
                let k = masked(family, addr, r[5], (r[4] >> 8) as u8);
                let forwarded = key.value(8) != 0 && key.value(9) != 0;
                let ttl = recent_seen_ttl(key.value(12) as u8, forwarded);
                self.recent.check(&c, k, ttl, now.jiffies(), now.hz)
            }
            st::HASHLIMIT => {
                // Field ids 0 (family), 1/2 (addresses), 4/5 (ports).
                let family = match key.value(0) {
                    4 => Family::V4,
                    6 => Family::V6,
                    _ => return false,
                };
                let k = hashlimit_key(
                    family,
                    ((r[1] >> st::HASHLIMIT_MODE_SHIFT) & 0xf) as u8,
                    (r[1] >> st::HASHLIMIT_SRCMASK_SHIFT) as u8,
                    (r[1] >> st::HASHLIMIT_DSTMASK_SHIFT) as u8,
                    [key.value(1), key.value(2)],
                    [key.value(4) as u16, key.value(5) as u16],
                );
                let avg = r[3] as u64 | ((r[4] & 0xff) as u64) << 32;
                let burst = r[4] >> st::HASHLIMIT_BURST_SHIFT;
                let mut entry = self.hashlimit.get(&(r[2], k)).copied();
                let under = hashlimit_step(&mut entry, avg, burst, r[5], now.hz, now.jiffies());
                if let Some(b) = entry {
                    self.hashlimit.insert((r[2], k), b);
                }
                under != (r[1] & st::F_ABOVE != 0)
            }
            st::QUOTA => {
                let (bytes, used) = (u64_at(2), u64_at(4));
                // Field id 14: the packet's length.
                let len = key.value(14) as u32;
                let over = r[1] & st::F_OVER != 0;
                match slot.get_or_insert(Bucket::Quota(used)) {
                    Bucket::Quota(c) => Quota { bytes, over, used }.admit(c, len),
                    _ => false,
                }
            }
            st::STATISTIC_NTH => {
                let invert = r[1] & st::F_INVERT != 0;
                match slot.get_or_insert(Bucket::Nth(0)) {
                    Bucket::Nth(seen) => Statistic::nth_admit(r[2], r[3], invert, seen),
                    _ => false,
                }
            }
            st::STATISTIC_RANDOM => {
                let invert = r[1] & st::F_INVERT != 0;
                Statistic::random_admit(r[2], invert, self.random.next_u32())
            }
            st::DYNSET => {
                let Some(op) = DynsetOp::from_code((r[1] >> st::DYNSET_OP_SHIFT) & 3) else {
                    return false;
                };
                let limit = (r[1] & st::F_DYNSET_LIMIT != 0).then(|| {
                    let unit: u64 =
                        [1, 60, 3600, 86400][((r[5] >> st::DYNSET_UNIT_SHIFT) & 3) as usize];
                    let cost = unit * 1_000_000_000 / (r[5] & 0xf_ffff).max(1) as u64;
                    ElementLimit {
                        cost,
                        tokens_max: cost.saturating_mul((r[5] >> st::DYNSET_BURST_SHIFT) as u64),
                        over: r[1] & st::F_DYNSET_OVER != 0,
                    }
                });
                let c = DynsetCheck {
                    set: r[2],
                    op,
                    invert: r[1] & st::F_INVERT != 0,
                    timeout_ms: r[3],
                    size: r[4],
                    limit,
                };
                // Field ids 0 (family), 1 (source), 2 (destination), 4
                // and 5 (ports).
                let family = match key.value(0) {
                    4 => Family::V4,
                    6 => Family::V6,
                    _ => return false,
                };
                let addr = key.value(if r[1] & st::F_RDEST != 0 { 2 } else { 1 });
                let (fam, addr) = masked(family, addr, u32::MAX, 128);
                let port = match (r[1] >> st::DYNSET_PORT_SHIFT) & 3 {
                    0 => 0,
                    1 => key.value(4) as u16,
                    2 => key.value(5) as u16,
                    _ => (r[1] >> st::DYNSET_PORT_CONST_SHIFT) as u16,
                };
                self.dynset
                    .check(&c, (fam, port, addr), now.jiffies(), now.ns, now.hz)
            }
            st::TIME => self
                .wall_secs()
                .is_some_and(|now| time_window_of(r).admits(now, self.minutes_west)),
            _ => false,
        }
    }
}

/// The window a time row holds (the inverse of the compiler's
/// `emit::time_row`).
fn time_window_of(r: &[u32]) -> TimeWindow {
    TimeWindow {
        date_start: r[2] as i64,
        date_stop: r[3] as i64,
        daytime_start: r[4] & 0x00ff_ffff,
        daytime_stop: r[1] >> st::TIME_DAYTIME_STOP_SHIFT,
        weekdays: (r[4] >> st::TIME_WEEKDAYS_SHIFT) as u8,
        monthdays: r[5],
        kernel_tz: r[1] & st::F_KERNEL_TZ != 0,
        contiguous: r[1] & st::F_CONTIGUOUS != 0,
    }
}
