//! Issue 13 item 6: the ipset types keyed on a MAC address or a mark
//! (`hash:mac`, `hash:ip,mac`, `hash:ip,mark`, `bitmap:ip,mac`) and the
//! `netmask` option load, answer lookups, save as ipset and nft text and
//! load back from both; a rule cannot reference the MAC/mark types yet.

use parapet_sets::*;

const TYPES: &str = "\
create hm hash:mac
add hm aa:bb:cc:dd:ee:ff
create him hash:ip,mac
add him 192.0.2.1,AA:BB:CC:00:00:01
create im hash:ip,mark markmask 0xffffffff
add im 192.0.2.1,0x123456
add im 192.0.2.2,7
create bim bitmap:ip,mac range 192.0.2.0/24
add bim 192.0.2.9,02:00:00:00:00:09
create hip hash:ip netmask 24
add hip 198.51.100.77
create bip bitmap:ip range 10.0.0.0/8 netmask 16
add bip 10.20.30.40
";

fn mac(m: u64) -> KeyValue {
    KeyValue::Mac(m)
}

fn v4(s: &str) -> LookupKey {
    LookupKey::new().ipv4(s.parse().unwrap())
}

fn check_lookups(s: &SetStore) {
    let k = LookupKey::new().push(mac(0xaabb_ccdd_eeff));
    assert_eq!(s.lookup("hm", &k), Some(true));
    let k = LookupKey::new().push(mac(0xaabb_ccdd_eefe));
    assert_eq!(s.lookup("hm", &k), Some(false));
    let k = v4("192.0.2.1").push(mac(0xaabb_cc00_0001));
    assert_eq!(s.lookup("him", &k), Some(true));
    let k = v4("192.0.2.1").push(KeyValue::Mark(0x123456));
    assert_eq!(s.lookup("im", &k), Some(true));
    let k = v4("192.0.2.2").push(KeyValue::Mark(7));
    assert_eq!(s.lookup("im", &k), Some(true));
    let k = v4("192.0.2.1").push(KeyValue::Mark(7));
    assert_eq!(s.lookup("im", &k), Some(false));
    let k = v4("192.0.2.9").push(mac(0x0200_0000_0009));
    assert_eq!(s.lookup("bim", &k), Some(true));
    // netmask 24: the whole /24 of the added address is a member.
    assert_eq!(s.lookup("hip", &v4("198.51.100.1")), Some(true));
    assert_eq!(s.lookup("hip", &v4("198.51.101.1")), Some(false));
    assert_eq!(s.lookup("bip", &v4("10.20.0.1")), Some(true));
    assert_eq!(s.lookup("bip", &v4("10.21.0.1")), Some(false));
}

#[test]
fn mac_mark_and_netmask_types_load_look_up_and_round_trip() {
    let mut s = SetStore::new();
    s.load_ipset(TYPES).unwrap();
    check_lookups(&s);
    assert_eq!(s.key_dims("hm"), &[KeyPart::EtherAddr]);
    assert_eq!(s.key_dims("im"), &[KeyPart::Ipv4Addr, KeyPart::Mark]);

    let saved = s.save_ipset(None);
    assert!(saved.contains("create hm hash:mac hashsize"), "{saved}");
    assert!(!saved.contains("create hm hash:mac family"), "{saved}");
    assert!(saved.contains("add hm aa:bb:cc:dd:ee:ff\n"), "{saved}");
    assert!(
        saved.contains(" netmask 24\nadd hip 198.51.100.0\n"),
        "{saved}"
    );
    assert!(
        saved.contains("create bim bitmap:ip,mac range 192.0.2.0-192.0.2.255\n"),
        "{saved}"
    );
    let mut again = SetStore::new();
    again.load_ipset(&saved).unwrap();
    check_lookups(&again);

    let nft = s.save_nft(None);
    assert!(
        nft.contains("set hm {\n\ttype ether_addr\n\telements = { aa:bb:cc:dd:ee:ff }"),
        "{nft}"
    );
    assert!(nft.contains("type ipv4_addr . mark"), "{nft}");
    let mut from_nft = SetStore::new();
    from_nft.load_nft(&nft).unwrap();
    check_lookups(&from_nft);
}

#[test]
fn bad_elements_and_options_are_refused_where_they_are() {
    let cases = [
        (
            "create m hash:mac\nadd m aa:bb:cc:dd:ee\n",
            2,
            "expected an Ethernet address",
        ),
        (
            "create m hash:ip,mark\nadd m 1.2.3.4,0x1ffffffff\n",
            2,
            "expected a mark",
        ),
        (
            "create m hash:ip,mark markmask 0xff\n",
            1,
            "option `markmask` is not supported",
        ),
        (
            "create b bitmap:ip,mac range 10.0.0.0/24\nadd b 10.0.1.1,02:00:00:00:00:01\n",
            2,
            "outside the set's range",
        ),
        (
            "create n hash:net netmask 24\n",
            1,
            "option `netmask` is not supported",
        ),
        (
            "create m hash:mac,ip\n",
            1,
            "unsupported set type `hash:mac,ip`",
        ),
        (
            "create l list:set\nadd l nope\n",
            2,
            "set `nope` does not exist",
        ),
    ];
    for (text, line, want) in cases {
        let e = SetStore::new().load_ipset(text).unwrap_err();
        assert_eq!(e.line, line, "{text}: {e:?}");
        assert!(e.message.contains(want), "{text}: {}", e.message);
    }
}

#[test]
fn mac_and_mark_sets_cannot_be_referenced_by_rules_yet() {
    assert_eq!(
        unreferenceable(&[KeyPart::Ipv4Addr, KeyPart::EtherAddr]),
        Some(KeyPart::EtherAddr)
    );
    assert_eq!(
        unreferenceable(&[KeyPart::Ipv4Addr, KeyPart::InetService]),
        None
    );
}
