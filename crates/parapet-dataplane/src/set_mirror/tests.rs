//! The mirror's unit tests: entries, expiries, shapes and where single
//! addresses go.

use super::*;

fn room() -> ExactRoom {
    [usize::MAX; 2]
}

#[test]
fn an_add_that_changes_no_entry_writes_nothing_unless_the_kernel_is_behind() {
    let mut s = SetState::new(3, &[SetDim::Ipv4Addr]).unwrap();
    let a = SetElement::new(&[(0x0a00_0001, 0x0a00_0001)]).expires(100);
    assert_eq!(
        s.add(3, std::slice::from_ref(&a), &mut room())
            .unwrap()
            .put
            .len(),
        1
    );
    // the same ban again (a replicated ban held already): no write
    assert!(s
        .add(3, std::slice::from_ref(&a), &mut room())
        .unwrap()
        .put
        .is_empty());
    // twice in one call, new: one write
    let b = SetElement::new(&[(0x0a00_0002, 0x0a00_0002)]).expires(100);
    assert_eq!(
        s.add(3, &[b.clone(), b.clone()], &mut room())
            .unwrap()
            .put
            .len(),
        1
    );
    // another expiry: written
    let later = SetElement::new(&[(0x0a00_0001, 0x0a00_0001)]).expires(300);
    let w = s.add(3, std::slice::from_ref(&later), &mut room()).unwrap();
    assert_eq!(w.put.len(), 1);
    assert_eq!(w.put[0].1.expires_ns, 300);
    // an overlapping element that leaves the entry's expiry as it is
    // (the /24 covers another entry; the /32 keeps 300)
    let wide = SetElement::new(&[(0x0a00_0000, 0x0a00_00ff)]).expires(200);
    let w = s.add(3, std::slice::from_ref(&wide), &mut room()).unwrap();
    assert!(
        w.put.iter().all(|p| p.1.prefixlen != 16 + 32),
        "{}",
        w.put.len()
    );
    // after a failed kernel write the mirror may be ahead: write again
    s.kernel_behind = true;
    assert_eq!(
        s.add(3, std::slice::from_ref(&later), &mut room())
            .unwrap()
            .put
            .len(),
        1
    );
}

#[test]
fn single_addresses_go_to_the_hash_while_it_has_room_then_to_the_trie() {
    let mut s = SetState::new(5, &[SetDim::Ipv4Addr]).unwrap();
    let one = |a: u128| SetElement::exact(&[a]);
    let maps = |w: &Writes| w.put.iter().map(|p| p.0.map()).collect::<Vec<_>>();
    let mut room = [2, 0];
    let w = s.add(5, &[one(1), one(2), one(3)], &mut room).unwrap();
    let mut got = maps(&w);
    got.sort_by_key(|m| *m as u8);
    assert_eq!(got, [EntryMap::Lpm, EntryMap::Exact4, EntryMap::Exact4]);
    assert_eq!((room, s.exact), ([0, 0], [2, 0]));
    // a prefix is never a single address
    let w = s
        .add(5, &[SetElement::new(&[(8, 9)])], &mut [9, 9])
        .unwrap();
    assert_eq!(maps(&w), [EntryMap::Lpm]);
    // refreshing an address keeps it where it is, room or not
    let w = s.add(5, &[one(3).expires(7)], &mut [9, 9]).unwrap();
    assert_eq!(maps(&w), [EntryMap::Lpm]);
    let w = s.add(5, &[one(1).expires(7)], &mut [0, 0]).unwrap();
    assert_eq!(maps(&w), [EntryMap::Exact4]);
    // deletes find each where it is and give the hash's room back
    let w = s.del(5, &[one(1), one(3)]).unwrap();
    let mut got: Vec<_> = w.del.iter().map(|k| k.map()).collect();
    got.sort_by_key(|m| *m as u8);
    assert_eq!(got, [EntryMap::Lpm, EntryMap::Exact4]);
    assert_eq!(s.exact, [1, 0]);
    // IPv6 /128s likewise
    let mut s6 = SetState::new(6, &[SetDim::Ipv6Addr]).unwrap();
    let w = s6.add(6, &[one(u128::MAX)], &mut [0, 1]).unwrap();
    assert_eq!(maps(&w), [EntryMap::Exact6]);
    assert_eq!(s6.flush().del.len(), 1);
    assert_eq!(s6.exact, [0, 0]);
}

#[test]
fn overlapping_elements_keep_the_latest_expiry() {
    let mut s = SetState::new(3, &[SetDim::Ipv4Addr]).unwrap();
    // the same /24 from a prefix and from a range
    let a = SetElement::new(&[(0x0a00_0000, 0x0a00_00ff)]).expires(100);
    let b = SetElement::new(&[(0x0a00_0000, 0x0a00_017f)]).expires(200);
    let w = s.add(3, std::slice::from_ref(&a), &mut room()).unwrap();
    assert_eq!(w.put.len(), 1);
    assert_eq!(w.put[0].1.expires_ns, 100);
    let mut w = s.add(3, std::slice::from_ref(&b), &mut room()).unwrap();
    w.put.sort_by_key(|p| p.1.prefixlen);
    let got: Vec<_> = w
        .put
        .iter()
        .map(|p| (p.1.expires_ns, p.1.prefixlen))
        .collect();
    assert_eq!(got, vec![(200, 16 + 24), (200, 16 + 25)]);
    assert_eq!(s.entries.len(), 2);
    let w = s.del(3, &[b]).unwrap();
    assert_eq!((w.put.len(), w.del.len()), (1, 1));
    assert_eq!(w.put[0].1.expires_ns, 100);
    let w = s.del(3, &[a]).unwrap();
    assert_eq!((w.put.len(), w.del.len()), (0, 1));
    assert!(s.entries.is_empty());
}

#[test]
fn three_elements_behind_one_entry() {
    let mut s = SetState::new(0, &[SetDim::Ipv4Addr]).unwrap();
    let slash24 = |w: &Writes| {
        w.put
            .iter()
            .find(|p| p.1.prefixlen == 16 + 24)
            .map(|p| p.1.expires_ns)
    };
    let a = SetElement::new(&[(0x0a00_0000, 0x0a00_00ff)]).expires(100);
    let b = SetElement::new(&[(0x0a00_0000, 0x0a00_017f)]).expires(200);
    let c = SetElement::new(&[(0x09ff_ffff, 0x0a00_00ff)]);
    s.add(0, &[a.clone(), b.clone(), c.clone()], &mut room())
        .unwrap();
    assert_eq!(s.entries.len(), 3); // /24, /25 and 9.255.255.255/32
    let w = s.del(0, std::slice::from_ref(&c)).unwrap();
    assert_eq!((slash24(&w), w.del.len()), (Some(200), 1));
    let w = s.del(0, std::slice::from_ref(&a)).unwrap();
    assert_eq!(slash24(&w), Some(200));
    let w = s.add(0, &[b.clone().expires(50)], &mut room()).unwrap();
    assert_eq!(slash24(&w), Some(50));
    let w = s.del(0, &[b]).unwrap();
    assert_eq!((w.put.len(), w.del.len()), (0, 2));
    assert!(s.entries.is_empty());
}

#[test]
fn replace_adds_first_and_deletes_the_rest() {
    let mut s = SetState::new(2, &[SetDim::Ipv4Addr, SetDim::Port]).unwrap();
    let a = SetElement::new(&[(10, 10), (80, 80)]);
    let b = SetElement::new(&[(0x0a00_0000, 0x0aff_ffff), (1000, 1001)]);
    let c = SetElement::exact(&[0xffff_ffff, 65535]);
    s.add(2, &[a.clone(), b.clone()], &mut room()).unwrap();
    let (add, del) = s.replace(2, &[b.clone(), c.clone()], &mut room()).unwrap();
    // b's two entries are in the kernel as they are: only c is written
    assert_eq!((add.put.len(), add.del.len()), (1, 0));
    assert_eq!((del.put.len(), del.del.len()), (0, 1));
    assert_eq!(s.len(), 2);
    let mut keep = std::collections::HashSet::new();
    keep.insert(s.element_key(&b).unwrap());
    assert_eq!(s.others(&keep), vec![c]);
}

#[test]
fn tuple_shapes_and_masks() {
    let mut s = SetState::new(1, &[SetDim::Ipv4Addr, SetDim::Port]).unwrap();
    let w = s
        .add(
            1,
            &[SetElement::new(&[(0x0a00_0000, 0x0aff_ffff), (80, 81)])],
            &mut room(),
        )
        .unwrap();
    // a short port range becomes points: two entries, one shape
    assert_eq!(w.put.len(), 2);
    let d = w.desc.unwrap();
    assert_eq!(d.n_shapes, 1);
    let mut bytes = Vec::new();
    for x in d.mask[0] {
        bytes.extend_from_slice(&x.to_ne_bytes());
    }
    assert_eq!(&bytes[..8], &[0xff, 0, 0, 0, 0xff, 0xff, 0, 0]);
    let w = s
        .add(
            1,
            &[SetElement::new(&[(0, 0xffff_ffff), (1024, 65535)])],
            &mut room(),
        )
        .unwrap();
    assert_eq!((w.put.len(), w.desc.unwrap().n_shapes), (6, 7));
    assert!(s
        .add(1, &[SetElement::new(&[(1, 0), (0, 0)])], &mut room())
        .is_err());
    assert_eq!(s.len(), 2);
}

#[test]
fn a_single_address_has_the_entry_the_split_gives_it() {
    for (dim, addrs) in [
        (SetDim::Ipv4Addr, vec![0u128, 1, 0x0a00_0001, 0xffff_ffff]),
        (
            SetDim::Ipv6Addr,
            vec![0, 1, 0x2001_0db8 << 96 | 7, u128::MAX],
        ),
    ] {
        let s = SetState::new(9, &[dim]).unwrap();
        for a in addrs {
            let el = SetElement::new(&[(a, a)]);
            let mut shapes = Vec::new();
            let split = s.split(9, &el, &mut shapes).unwrap();
            assert_eq!(
                split,
                vec![s.single_entry(9, &el).unwrap()],
                "{dim:?} {a:#x}"
            );
        }
        // a range, even of two addresses, takes the general split
        assert!(s.single_entry(9, &SetElement::new(&[(4, 5)])).is_none());
    }
    // not an address set
    let ports = SetState::new(9, &[SetDim::Port]).unwrap();
    assert!(ports
        .single_entry(9, &SetElement::new(&[(80, 80)]))
        .is_none());
}

#[test]
fn one_element_twice_in_one_call_is_written_once_with_its_last_expiry() {
    let mut s = SetState::new(3, &[SetDim::Ipv4Addr]).unwrap();
    let a = |exp| SetElement::new(&[(0x0a00_0001, 0x0a00_0001)]).expires(exp);
    let w = s.add(3, &[a(100), a(300)], &mut room()).unwrap();
    assert_eq!(w.put.len(), 1);
    assert_eq!(w.put[0].1.expires_ns, 300);
    // held with 300: the same again in one call writes nothing, another
    // expiry after it writes that one
    assert!(s
        .add(3, &[a(300), a(300)], &mut room())
        .unwrap()
        .put
        .is_empty());
    let w = s.add(3, &[a(300), a(500)], &mut room()).unwrap();
    assert_eq!((w.put.len(), w.put[0].1.expires_ns), (1, 500));
}

#[test]
fn a_single_address_in_the_trie_is_found_there_after_the_hash_filled() {
    let mut s = SetState::new(3, &[SetDim::Ipv4Addr]).unwrap();
    let a = |x, exp| SetElement::new(&[(x, x)]).expires(exp);
    let mut room = [1, 1];
    s.add(3, &[a(1, 100), a(2, 100)], &mut room).unwrap();
    assert_eq!(s.exact, [1, 0], "the second went to the trie");
    // refreshed: stays where it is, no new hash entry
    let w = s.add(3, &[a(2, 200)], &mut [5, 5]).unwrap();
    assert_eq!(w.put.len(), 1);
    assert!(matches!(w.put[0].0, EntryKey::Lpm(_)), "{:?}", w.put[0].0);
    assert_eq!(s.exact, [1, 0]);
    // deleted from where it is
    let w = s.del(3, &[a(2, 0)]).unwrap();
    assert!(matches!(w.del[..], [EntryKey::Lpm(_)]));
}
