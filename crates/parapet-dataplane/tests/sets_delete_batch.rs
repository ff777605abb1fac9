//! Batched deletes (`BPF_MAP_DELETE_BATCH`) against one delete per entry:
//! the same random elements (overlapping IPv4 ranges and prefixes, an
//! addr . port concatenation with ranges, each with an expiry or none) go
//! into three sets; set A loses a random selection (present, absent and
//! repeated elements) one element per `set_del` with batches off, set B
//! the same selection in one `set_del` with batches on, and set C is
//! filled with the survivors only. The mirror and the kernel's maps (read
//! back) of A, B and C must be equal. A second test deletes an entry
//! behind the mirror's back (through the pinned map: the exact hash, then
//! the trie): a batch must go on past it. A third reaps sets holding expired elements, through the
//! expiry index and by the scan it replaced: both must leave the maps as
//! deleting the expired elements does.

mod common;

use std::path::PathBuf;

use aya::maps::lpm_trie::{Key, LpmTrie};
use aya::maps::{HashMap as BpfHashMap, Map, MapData};
use common::{load_dataplane, Rng};
use parapet_dataplane::{
    monotonic_ns, Dataplane, Features, KernelSetEntry, LoadOptions, SetDim, SetElement, SetSizing,
};

const ROUNDS: u64 = 12;

/// Elements around 10.0.0.0/20 (so ranges overlap and share prefixes):
/// single addresses, aligned prefixes and odd ranges; with a port range
/// when `ports`.
fn random_elements(rng: &mut Rng, n: usize, ports: bool) -> Vec<SetElement> {
    let base = 0x0a00_0000u128;
    let now = monotonic_ns();
    (0..n)
        .map(|_| {
            let lo = base + u128::from(rng.below(4096));
            let addr = match rng.below(3) {
                0 => (lo, lo),
                1 => {
                    let bits = rng.below(9) as u32;
                    let lo = lo & !((1u128 << bits) - 1);
                    (lo, lo + (1u128 << bits) - 1)
                }
                _ => (lo, lo + u128::from(rng.below(300))),
            };
            let mut ranges = vec![addr];
            if ports {
                let p = u128::from(rng.below(64));
                ranges.push((p, p + u128::from(rng.below(20))));
            }
            let mut el = SetElement::new(&ranges);
            if rng.chance(60) {
                el.expires_ns = now + 3_600_000_000_000 + rng.below(1_000_000) * 1000;
            }
            el
        })
        .collect()
}

/// The kernel entries of `id`, the mirror's element and entry counts.
fn state(dp: &Dataplane, id: u32) -> (Vec<KernelSetEntry>, usize, usize) {
    (
        dp.set_kernel_entries(id).unwrap(),
        dp.set_len(id).unwrap(),
        dp.set_entries(id).unwrap(),
    )
}

/// Equal states, or a short account of the first difference.
fn same(
    x: &(Vec<KernelSetEntry>, usize, usize),
    y: &(Vec<KernelSetEntry>, usize, usize),
    what: &str,
) {
    assert_eq!(
        (x.1, x.2),
        (y.1, y.2),
        "{what}: mirror element and entry counts"
    );
    let first = x.0.iter().zip(&y.0).position(|(p, q)| p != q);
    assert!(
        x.0.len() == y.0.len() && first.is_none(),
        "{what}: kernel entries differ ({} vs {}; first at {first:?}: {:?} vs {:?})",
        x.0.len(),
        y.0.len(),
        first.map(|i| &x.0[i]),
        first.map(|i| &y.0[i]),
    );
}

fn one_round(dp: &mut Dataplane, seed: u64, dims: &[SetDim]) {
    let mut rng = Rng::new(0x5e7_de1e + seed);
    let ports = dims.len() == 2;
    let n = 40 + rng.below(300) as usize;
    let els = random_elements(&mut rng, n, ports);
    let (a, b, c) = (0, 1, 2);
    for id in [a, b, c] {
        dp.create_set(id, dims).unwrap();
    }
    dp.set_batched_writes(true);
    dp.set_add(a, &els).unwrap();
    dp.set_add(b, &els).unwrap();
    // present elements (some twice), and elements never added
    let mut dels: Vec<SetElement> = els.iter().filter(|_| rng.chance(55)).cloned().collect();
    dels.extend(els.iter().filter(|_| rng.chance(5)).cloned());
    dels.extend(random_elements(&mut rng, 20, ports));
    let gone: std::collections::HashSet<&Vec<(u128, u128)>> =
        dels.iter().map(|d| &d.ranges).collect();
    let survivors: Vec<SetElement> = els
        .iter()
        .filter(|e| !gone.contains(&e.ranges))
        .cloned()
        .collect();
    assert!(
        dp.set_kernel_entries(b).unwrap().len() > 1,
        "seed {seed}: the sets were filled"
    );

    dp.set_batched_writes(false);
    for d in &dels {
        dp.set_del(a, std::slice::from_ref(d)).unwrap();
    }
    dp.set_batched_writes(true);
    dp.set_del(b, &dels).unwrap();
    dp.set_add(c, &survivors).unwrap();

    let (sa, sb, mut sc) = (state(dp, a), state(dp, b), state(dp, c));
    let what = format!("seed {seed} {dims:?}");
    assert_eq!(sb.0.len(), sb.2, "{what}: kernel entries vs the mirror's");
    same(&sa, &sb, &format!("{what}: single vs batched deletes"));
    let mut sb = sb;
    if ports {
        // The tuple hash numbers shapes in the order elements made them:
        // C, filled with the survivors only, may number them otherwise.
        for s in [&mut sb, &mut sc] {
            s.0.iter_mut().for_each(|e| e.shape = 0);
            s.0.sort();
        }
    }
    same(
        &sb,
        &sc,
        &format!("{what}: batched deletes vs survivors only"),
    );
    for id in [a, b, c] {
        dp.destroy_set(id).unwrap();
    }
}

#[test]
#[ignore = "needs root"]
fn batched_deletes_leave_the_maps_as_single_deletes_do() {
    let mut dp = load_dataplane("sets_delete_batch", &LoadOptions::default());
    for seed in 0..ROUNDS {
        one_round(&mut dp, seed, &[SetDim::Ipv4Addr]);
        one_round(&mut dp, seed, &[SetDim::Ipv4Addr, SetDim::Port]);
    }
    // nothing left behind in either map
    assert!(dp.set_kernel_entries(0).is_err(), "sets destroyed");
}

/// Random elements, about half of them expired already (overlapping the
/// live ones), go into set A (reaped through the expiry index) and set B
/// (reaped by a scan), in small budgets; set C loses the expired ones by
/// `set_del`: the three must be equal.
fn reap_round(dp: &mut Dataplane, seed: u64, dims: &[SetDim]) {
    let mut rng = Rng::new(0x4ea9 + seed);
    let n = 40 + rng.below(300) as usize;
    let mut els = random_elements(&mut rng, n, dims.len() == 2);
    let past = monotonic_ns() - 1;
    for el in els.iter_mut() {
        if rng.chance(50) {
            el.expires_ns = past - rng.below(1000);
        }
    }
    // an element added twice keeps its last expiry: the model too
    let mut seen = std::collections::HashSet::new();
    els.reverse();
    els.retain(|e| seen.insert(e.ranges.clone()));
    let expired: Vec<SetElement> = els
        .iter()
        .filter(|e| e.expires_ns != 0 && e.expires_ns <= past)
        .cloned()
        .collect();
    let what = format!("seed {seed}, {} dimension(s)", dims.len());
    let (a, b, c) = (3, 4, 5);
    // (added in full, so that a concatenation's shapes are numbered as
    // in A and B, then the expired ones deleted)
    dp.create_set(c, dims).unwrap();
    dp.set_add(c, &els).unwrap();
    dp.set_del(c, &expired).unwrap();
    for (id, by_scan) in [(a, false), (b, true)] {
        dp.create_set(id, dims).unwrap();
        dp.set_add(id, &els).unwrap();
        dp.set_reap_by_scan(by_scan);
        // bounded: every call frees up to 7 elements of the set
        for _ in 0..=n / 7 + 1 {
            if dp.reap_sets(7).unwrap() == 0 {
                break;
            }
        }
        same(
            &state(dp, id),
            &state(dp, c),
            &format!("{what}: reaped (by scan: {by_scan}) vs deleted"),
        );
    }
    dp.set_reap_by_scan(false);
    for id in [a, b, c] {
        dp.destroy_set(id).unwrap();
    }
}

#[test]
#[ignore = "needs root"]
fn reaping_leaves_the_maps_as_deleting_the_expired_elements_does() {
    let mut dp = load_dataplane("sets_reap", &LoadOptions::default());
    for seed in 0..4 {
        reap_round(&mut dp, seed, &[SetDim::Ipv4Addr]);
        reap_round(&mut dp, seed, &[SetDim::Ipv4Addr, SetDim::Port]);
    }
}

/// A pin directory on bpffs, removed when dropped.
struct PinDir(PathBuf);

impl Drop for PinDir {
    fn drop(&mut self) {
        let _ = parapet_dataplane::pin::remove_pins(&self.0);
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
#[ignore = "needs root"]
fn a_batch_delete_goes_on_past_an_entry_already_gone() {
    parapet_testbed::require_root();
    // single addresses in the exact hash (the default), and in the trie
    // (an exact hash of one entry: the other nine overflow to the trie)
    for exact4_entries in [SetSizing::default().exact4_entries, 1] {
        batch_delete_past_a_missing_entry(exact4_entries);
    }
}

fn batch_delete_past_a_missing_entry(exact4_entries: u32) {
    let dir = PinDir(PathBuf::from(format!(
        "/sys/fs/bpf/parapet-test-delbatch-{}-{exact4_entries}",
        std::process::id()
    )));
    parapet_dataplane::pin::ensure_bpffs(&dir.0).unwrap();
    let sizing = SetSizing {
        exact4_entries,
        ..SetSizing::default()
    };
    let mut dp = Dataplane::load_pinned(
        &LoadOptions::default(),
        &sizing,
        &Features::default(),
        Some(&dir.0),
    )
    .unwrap();
    dp.finish_adoption().unwrap(); // pins the maps
    dp.create_set(7, &[SetDim::Ipv4Addr]).unwrap();
    let els: Vec<SetElement> = (1..=10u128)
        .map(|i| SetElement::exact(&[0x0a00_0000 + i]))
        .collect();
    dp.set_add(7, &els).unwrap();
    assert_eq!(dp.set_kernel_entries(7).unwrap().len(), 10);
    let in_hash = dp.set_exact_entries(7).unwrap();
    assert_eq!(in_hash, 10.min(exact4_entries as usize));

    // 10.0.0.5 leaves the kernel without the mirror knowing
    let pinned = |name: &str| {
        std::fs::read_dir(&dir.0)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.path().join(name))
            .find(|p| p.exists())
            .expect("the pinned map")
    };
    if in_hash == 10 {
        let md = MapData::from_pin(pinned("parapet_set_exact4")).unwrap();
        let mut hash: BpfHashMap<MapData, [u8; 8], u64> =
            BpfHashMap::try_from(Map::HashMap(md)).unwrap();
        let mut key = [0u8; 8];
        key[..2].copy_from_slice(&7u16.to_ne_bytes());
        key[4..].copy_from_slice(&[10, 0, 0, 5]);
        hash.remove(&key).unwrap();
    } else {
        let md = MapData::from_pin(pinned("parapet_set_lpm")).unwrap();
        let mut trie: LpmTrie<MapData, [u8; 20], [u8; 16]> =
            LpmTrie::try_from(Map::LpmTrie(md)).unwrap();
        let mut data = [0u8; 20];
        data[..2].copy_from_slice(&7u16.to_be_bytes());
        data[2..6].copy_from_slice(&[10, 0, 0, 5]);
        trie.remove(&Key::new(16 + 32, data)).unwrap();
    }
    assert_eq!(dp.set_kernel_entries(7).unwrap().len(), 9);

    dp.set_batched_writes(true);
    dp.set_del(7, &els).unwrap();
    assert_eq!(
        dp.set_kernel_entries(7).unwrap(),
        vec![],
        "the entries after the absent one were deleted too"
    );
    assert_eq!(dp.set_len(7).unwrap(), 0);
}
