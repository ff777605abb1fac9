//! The `-m string` probes both kernel oracles send (the kernel's
//! iptables-legacy in `string_kernel.rs`, parapetd's BPF at the netfilter
//! hooks in `parapet-cli/tests/netfilter_oracle_string.rs`): the rules
//! and the datagrams. Its includer has `raw_out` at its root.

#![allow(dead_code)]

use parapet_model::{Family, Packet};

/// The UDP payload starts at byte 28 (20 of IP header, 8 of UDP). Rule 3
/// reads bytes [30, 40); rule 6's hex pattern is the source port 40001 in
/// the UDP header (bytes 20 and 21).
pub const RULES: &str = "*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A OUTPUT -p udp -m udp --sport 40001 -m string --string \"facebook.com\" --algo bm -j ACCEPT
-A OUTPUT -p udp -m udp --sport 40001 -m string --string \"Kazaa\" --algo kmp --icase -j ACCEPT
-A OUTPUT -p udp -m udp --sport 40001 -m string --string \"edge\" --algo bm --from 30 --to 40 -j ACCEPT
-A OUTPUT -p udp -m udp --sport 40001 -m string --hex-string \"|0d0a|\" --algo kmp -j ACCEPT
-A OUTPUT -p udp -m udp --sport 40001 -m string ! --string \"q\" --algo kmp -m string --string \"zz\" --algo bm -j ACCEPT
-A OUTPUT -p udp -m udp --sport 40001 -m string --string \"hdr\" --algo kmp -m string --hex-string \"|9c41|\" --algo bm --from 20 --to 22 -j ACCEPT
-A OUTPUT -p udp -m udp --sport 40001 -m string --hex-string \"|e9|\" --algo bm --icase -j ACCEPT
-A OUTPUT -p udp -m udp --sport 40001 -m string --string \"tail!\" --algo kmp --from 1000 -j ACCEPT
-A OUTPUT -p udp -m udp --sport 40001 -j ACCEPT
COMMIT
";

/// The UDP payloads probed.
pub fn payloads() -> Vec<Vec<u8>> {
    [
        &b"hello facebook.com"[..],
        b"FaceBook.Com",
        b"-- kAzAa --",
        b"..edge",
        b"........edge",
        b".........edge",
        b".edge",
        b"line\r\n",
        b"zz",
        b"zzq",
        b"hdr",
        b"\xc9",
        b"\xe9",
        b"\xc1",
        b"",
    ]
    .iter()
    .map(|p| p.to_vec())
    .chain([
        // rule 8: at the very end of a 1,400-byte datagram, then cut by it
        [vec![b'.'; 1367], b"tail!".to_vec()].concat(),
        [vec![b'.'; 1368], b"tail".to_vec()].concat(),
        // and before its --from (byte 1000 of the datagram)
        [b"tail!".to_vec(), vec![b'.'; 1367]].concat(),
    ])
    .collect()
}

/// An IPv4 UDP datagram from 127.0.0.1:40001 to 127.0.0.1:9999.
pub fn datagram(payload: &[u8]) -> Vec<u8> {
    let len = 28 + payload.len() as u16;
    let mut d = vec![0x45, 0, 0, 0, 0, 1, 0, 0, 64, 17, 0, 0];
    d[2..4].copy_from_slice(&len.to_be_bytes());
    d.extend([127, 0, 0, 1, 127, 0, 0, 1]);
    let c = crate::raw_out::checksum(&d);
    d[10..12].copy_from_slice(&c.to_be_bytes());
    d.extend(40001u16.to_be_bytes());
    d.extend(9999u16.to_be_bytes());
    d.extend((len - 20).to_be_bytes());
    d.extend([0, 0]);
    d.extend(payload);
    d
}

pub fn probes() -> Vec<Packet> {
    payloads()
        .iter()
        .map(|p| {
            let bytes = datagram(p);
            let mut pkt = Packet::new(Family::V4, 0x7f00_0001, 0x7f00_0001, 17, 40001, 9999);
            pkt.len = bytes.len() as u32;
            pkt.datagram = Some(bytes.into_boxed_slice());
            pkt
        })
        .collect()
}
