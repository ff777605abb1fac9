//! Incremental inserts and deletes give the same answers as rebuilding the
//! changed list from scratch, and are much cheaper than a rebuild.

mod common;

use parapet_compile::*;
use parapet_model::*;
use std::time::Instant;

fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

fn check(inc: &Incremental, packets: &[Packet]) {
    let list = inc.list();
    for p in packets {
        let want = list.classify(p, &[]);
        assert_eq!(inc.classify(p), (want.rule_id, want.verdict), "{p}");
    }
}

#[test]
fn random_edits_match_the_edited_list() {
    // Seeds 3, 8 and 14 tombstone a base entry that covered a whole leaf
    // region: the entries after it must still be in the leaf.
    for seed in [11, 3, 8, 14] {
        random_edits(seed);
    }
}

fn random_edits(seed: u64) {
    let rs = parapet_gen::random_ruleset(
        seed,
        &parapet_gen::RandomSpec {
            rules: 300,
            control_flow: false,
            ..Default::default()
        },
    );
    let list = flatten(&rs, rs.select_chain(None).unwrap()).unwrap();
    let packets = parapet_gen::packets_for(&rs, 4, 400);
    let pool = list.entries.clone();
    let mut inc = Incremental::new(list, BuildOptions::default()).unwrap();
    inc.max_overlay = 16;
    let mut rnd = xorshift(77);
    let mut next_id = 10_000;
    for step in 0..200 {
        if rnd().is_multiple_of(3) && !inc.is_empty() {
            let pos = rnd() as usize % inc.len();
            inc.remove(pos).unwrap();
        } else {
            let mut e = pool[rnd() as usize % pool.len()].clone();
            e.rule_id = next_id;
            next_id += 1;
            let pos = rnd() as usize % (inc.len() + 1);
            inc.insert(pos, e).unwrap();
        }
        if step % 10 == 0 {
            check(&inc, &packets);
        }
    }
    check(&inc, &packets);
    assert!(
        inc.rebuilds() > 0,
        "the overlay limit must have forced merges"
    );
    // Non-terminal entries are refused.
    let mut e = pool[0].clone();
    e.kind = EntryKind::Log;
    assert_eq!(inc.insert(0, e), Err(UpdateError::NotPure));
}

#[test]
fn updates_on_a_10k_set_are_cheap() {
    let path = common::classbench_dir().join("acl1_10k.gz");
    let Some(text) = common::read_maybe_gz(&path) else {
        eprintln!("SKIP: {} not found", path.display());
        return;
    };
    let list = common::classbench_list(&text);
    let trace = common::read_maybe_gz(&common::classbench_dir().join("acl1_10k_trace.gz"))
        .map(|t| common::classbench_trace(&t))
        .unwrap_or_default();
    let packets: Vec<Packet> = trace.into_iter().step_by(50).collect();
    let t = Instant::now();
    let mut inc = Incremental::new(list.clone(), BuildOptions::default()).unwrap();
    let build = t.elapsed();
    let t = Instant::now();
    let mut e = list.entries[5000].clone();
    e.rule_id = 99_999;
    inc.insert(100, e).unwrap();
    inc.remove(2000).unwrap();
    let update = t.elapsed() / 2;
    eprintln!("10k set: build {build:?}, one update {update:?} (shared machine)");
    assert!(update < build, "update {update:?} vs build {build:?}");
    check(&inc, &packets);
}
