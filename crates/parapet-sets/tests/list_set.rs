//! ipset `list:set`: loading (`create … list:set`, `add L SET [before|after
//! OTHER] [timeout T]`), the kernel's match semantics (first member that
//! matches; members with more dimensions than the rule's flags, or of the
//! other family, never match; expired members are skipped), the errors
//! ipset gives, and save → load round trips.

use parapet_model::{Dir, Packet, SetKeySpec, SetRef};
use parapet_sets::{ManualClock, SetStore};
use proptest::prelude::*;
use std::sync::Arc;

fn flags(name: &str, dirs: &[Dir]) -> SetRef {
    SetRef {
        name: name.to_string(),
        key: SetKeySpec::Flags(dirs.to_vec()),
    }
}

fn v4(s: &str) -> u32 {
    u32::from(s.parse::<std::net::Ipv4Addr>().unwrap())
}

fn pkt(src: &str, dst: &str, dport: u16) -> Packet {
    Packet::v4(v4(src), v4(dst), 6, 40000, dport)
}

const LISTS: &str = "\
create a hash:ip family inet
add a 10.0.0.1
create ap hash:ip,port family inet
add ap 10.0.0.2,tcp:22
create six hash:ip family inet6
add six 2001:db8::1
create l list:set size 4
add l six
add l ap
add l a
";

fn store_at(text: &str, clock: &Arc<ManualClock>) -> SetStore {
    let mut s = SetStore::with_clock(clock.clone());
    s.load_ipset(text).unwrap();
    s
}

#[test]
fn a_list_matches_when_a_member_does_and_dimensions_must_fit_the_flags() {
    let clock = Arc::new(ManualClock::new(1_000));
    let s = store_at(LISTS, &clock);
    let src = flags("l", &[Dir::Src]);
    let src_dst = flags("l", &[Dir::Src, Dir::Dst]);
    // member `a` (one dimension) answers a one-flag reference
    assert_eq!(
        s.ref_matches(&src, &pkt("10.0.0.1", "192.0.2.1", 80)),
        Some(true)
    );
    assert_eq!(
        s.ref_matches(&src, &pkt("10.0.0.9", "192.0.2.1", 80)),
        Some(false)
    );
    // `ap` has two dimensions: with one flag the kernel skips it
    assert_eq!(
        s.ref_matches(&src, &pkt("10.0.0.2", "192.0.2.1", 22)),
        Some(false)
    );
    assert_eq!(
        s.ref_matches(&src_dst, &pkt("10.0.0.2", "192.0.2.1", 22)),
        Some(true)
    );
    assert_eq!(
        s.ref_matches(&src_dst, &pkt("10.0.0.2", "192.0.2.1", 23)),
        Some(false)
    );
    // `a` with src,dst uses the first flag
    assert_eq!(
        s.ref_matches(&src_dst, &pkt("10.0.0.1", "192.0.2.1", 1)),
        Some(true)
    );
    let dst = flags("l", &[Dir::Dst]);
    assert_eq!(
        s.ref_matches(&dst, &pkt("10.0.0.1", "192.0.2.1", 1)),
        Some(false)
    );
    assert_eq!(
        s.ref_matches(&dst, &pkt("192.0.2.1", "10.0.0.1", 1)),
        Some(true)
    );
    // an inet6 member never answers an IPv4 packet, and answers IPv6 ones
    let p6 = Packet::new(
        parapet_model::Family::V6,
        u128::from("2001:db8::1".parse::<std::net::Ipv6Addr>().unwrap()),
        1,
        6,
        1,
        2,
    );
    assert_eq!(s.ref_matches(&src, &p6), Some(true));
    assert_eq!(s.ref_matches(&flags("nope", &[Dir::Src]), &p6), None);
    // nft-style field references never reach an ipset list
    let fields = SetRef {
        name: "l".into(),
        key: SetKeySpec::Fields(vec![parapet_model::Field::SrcAddr]),
    };
    assert_eq!(
        s.ref_matches(&fields, &pkt("10.0.0.1", "192.0.2.1", 80)),
        Some(false)
    );
}

#[test]
fn before_and_after_place_members_and_save_keeps_the_order() {
    let clock = Arc::new(ManualClock::new(0));
    let text = "create a hash:ip\ncreate b hash:ip\ncreate c hash:ip\ncreate l list:set\nadd l a\nadd l c after a\nadd l b before c\n";
    let s = store_at(text, &clock);
    let names: Vec<&str> = s
        .list("l")
        .unwrap()
        .members
        .iter()
        .map(|m| m.name.as_str())
        .collect();
    assert_eq!(names, ["a", "b", "c"]);
    let saved = s.save_ipset(None);
    assert!(
        saved.ends_with("create l list:set size 8\nadd l a\nadd l b\nadd l c\n"),
        "{saved}"
    );
    let again = store_at(&saved, &clock);
    assert_eq!(again.list("l"), s.list("l"));
}

#[test]
fn member_timeouts_expire_and_the_list_default_applies() {
    let clock = Arc::new(ManualClock::new(10_000));
    let text = "create a hash:ip\nadd a 10.0.0.1\ncreate b hash:ip\nadd b 10.0.0.2\ncreate l list:set size 4 timeout 5\nadd l a\nadd l b timeout 0\n";
    let s = store_at(text, &clock);
    let r = flags("l", &[Dir::Src]);
    assert_eq!(
        s.ref_matches(&r, &pkt("10.0.0.1", "1.1.1.1", 1)),
        Some(true)
    );
    clock.set(14_999);
    assert_eq!(
        s.ref_matches(&r, &pkt("10.0.0.1", "1.1.1.1", 1)),
        Some(true)
    );
    assert!(s.save_ipset(Some("l")).contains("add l a timeout 1\n"));
    clock.set(15_000);
    assert_eq!(
        s.ref_matches(&r, &pkt("10.0.0.1", "1.1.1.1", 1)),
        Some(false)
    );
    assert_eq!(
        s.ref_matches(&r, &pkt("10.0.0.2", "1.1.1.1", 1)),
        Some(true)
    );
    assert_eq!(
        s.save_ipset(Some("l")),
        "create l list:set size 4 timeout 5\nadd l b timeout 0\n"
    );
}

#[test]
fn the_corpus_setlist_files_load() {
    let clock = Arc::new(ManualClock::new(0));
    let s = store_at(
        "create a hash:ip\ncreate b hash:ip\ncreate c hash:ip\ncreate d hash:ip\ncreate e hash:ip\ncreate test list:set timeout 5 size 4\nadd test a\nadd test b\nadd test c\nadd test d\n",
        &clock,
    );
    assert_eq!(s.list("test").unwrap().members.len(), 4);
    assert_eq!(s.list_names(), ["test"]);
}

fn load_err(text: &str) -> String {
    let mut s = SetStore::new();
    let before = format!("{:?}", s);
    let e = s.load_ipset(text).unwrap_err();
    assert_eq!(format!("{:?}", s), before, "a failed load changes nothing");
    format!("{}:{}: {}", e.line, e.column, e.message)
}

#[test]
fn what_ipset_refuses_is_an_error_at_its_position() {
    let base = "create a hash:ip\ncreate b hash:ip\ncreate l list:set size 1\n";
    assert_eq!(
        load_err(&format!("{base}add l a\nadd l b\n")),
        "5:7: list:set `l`: the list is full (size 1): ipset refuses the add"
    );
    assert_eq!(
        load_err(&format!("{base}add l zz\n")),
        "4:7: set `zz` does not exist"
    );
    assert_eq!(
        load_err(&format!("{base}create m list:set\nadd m l\n")),
        "5:7: set `l` is a list:set: a list cannot hold a list"
    );
    assert_eq!(
        load_err(&format!("{base}add l a\ndestroy a\n")),
        "5:9: set `a` is in use: list:set `l` holds it"
    );
    assert_eq!(
        load_err(&format!("{base}add l a\nadd l a\n")),
        "5:7: list:set `l`: set `a` is already in the list"
    );
    assert_eq!(
        load_err(&format!("{base}add l a timeout 3\n")),
        "4:7: list:set `l`: a member timeout needs a list created with `timeout` (ipset: timeout extension not enabled)"
    );
    assert_eq!(
        load_err(&format!("{base}add l a before b\n")),
        "4:7: list:set `l`: set `b` is not in the list"
    );
    assert_eq!(
        load_err(&format!("{base}del l a\n")),
        "4:7: list:set `l`: set `a` is not in the list"
    );
    assert_eq!(
        load_err("create l list:set hashsize 4\n"),
        "1:19: option `hashsize` does not apply to list:set: expected size, timeout, counters or comment"
    );
    assert_eq!(
        load_err(&format!("{base}add l a\nrename a c\n")),
        "5:8: rename of a list:set or of a set a list:set holds is not supported"
    );
    assert_eq!(
        load_err(&format!("{base}add l a\ndestroy\n")),
        "5:1: set `a` is in use: list:set `l` holds it (flush the list first)"
    );
    assert_eq!(
        load_err("create a hash:ip\ncreate a list:set\n"),
        "2:8: set `a` already exists"
    );
}

#[test]
fn destroy_and_flush_of_a_list_release_its_members() {
    let mut s = SetStore::new();
    s.load_ipset("create a hash:ip\ncreate l list:set\nadd l a\nflush l\ndestroy a\n")
        .unwrap();
    assert!(s.list("l").unwrap().members.is_empty());
    s.load_ipset("create a hash:ip\nadd l a\ndestroy l\ndestroy a\n")
        .unwrap();
    assert!(s.list("l").is_none() && s.get("a").is_none());
    s.load_ipset("create a hash:ip\nadd l a\nflush l\ndestroy\n")
        .unwrap_err();
    s.load_ipset("create a hash:ip\ncreate l list:set\nadd l a\nflush l\ndestroy\n")
        .unwrap();
    assert!(s.list_names().is_empty() && s.names().is_empty());
}

proptest! {
    /// A list matches exactly when some live member whose dimension fits
    /// the flags matches on its own (the order only decides which one).
    #[test]
    fn a_list_is_the_union_of_its_fitting_members(
        members in proptest::collection::vec((0u8..4, proptest::collection::vec(0u8..8, 0..4)), 1..6),
        src in 0u8..8, dst in 0u8..8, dport in 20u16..24, two_flags in any::<bool>(),
    ) {
        let mut text = String::new();
        let mut list = String::from("create l list:set size 8\n");
        for (i, (kind, hosts)) in members.iter().enumerate() {
            let typ = if *kind == 3 { "hash:ip,port" } else { "hash:ip" };
            text.push_str(&format!("create s{i} {typ} family inet\n"));
            for h in hosts {
                let el = if *kind == 3 { format!("10.0.0.{h},tcp:{}", 20 + h % 4) } else { format!("10.0.0.{h}") };
                text.push_str(&format!("add s{i} {el}\n"));
            }
            list.push_str(&format!("add l s{i}\n"));
        }
        text.push_str(&list);
        let mut s = SetStore::new();
        s.load_ipset(&text).unwrap();
        let dirs: &[Dir] = if two_flags { &[Dir::Src, Dir::Dst] } else { &[Dir::Src] };
        let p = pkt(&format!("10.0.0.{src}"), &format!("10.0.0.{dst}"), dport);
        let expected = members.iter().enumerate().any(|(i, (kind, _))| {
            let fits = *kind != 3 || two_flags;
            fits && s.ref_matches(&flags(&format!("s{i}"), dirs), &p) == Some(true)
        });
        prop_assert_eq!(s.ref_matches(&flags("l", dirs), &p), Some(expected));
        // and a save reloads to the same list
        let mut again = SetStore::new();
        again.load_ipset(&s.save_ipset(None)).unwrap();
        prop_assert_eq!(again.list("l"), s.list("l"));
    }
}
