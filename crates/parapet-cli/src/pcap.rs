//! Packet captures as traces: pcap and pcapng files, parsed frame by frame
//! with the dataplane's own parser (the Rust twin of the eBPF one), so a
//! capture classifies offline exactly as the kernel would see it.

use anyhow::{bail, Context, Result};
use parapet_dataplane::frame::{parse_frame_tcp, TcpOptionArea};
use parapet_dataplane::ParseStatus;
use parapet_model::{CtState, Family, Packet};
use pcap_file::pcap::PcapReader;
use pcap_file::pcapng::{Block, PcapNgReader};
use pcap_file::DataLink;
use std::io::Read;
use std::path::Path;

/// One record of a trace: a packet to classify, or a captured frame the
/// dataplane would not classify (not IP, or a header it drops).
pub enum TraceItem {
    /// A parsed packet.
    Packet(Packet),
    /// A frame passed or dropped before classification, and why.
    Unclassified {
        /// Whether the dataplane lets it through.
        passes: bool,
        /// What the parser found.
        why: &'static str,
    },
}

/// The frames of a capture as Ethernet frames, or `None` when the file is
/// not a capture (so it is read as a text trace).
pub fn frames(path: &Path) -> Result<Option<Vec<Vec<u8>>>> {
    let mut magic = [0u8; 4];
    let mut f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(_) => return Ok(None),
    };
    if f.read_exact(&mut magic).is_err() {
        return Ok(None);
    }
    let m = u32::from_le_bytes(magic);
    let file = std::fs::File::open(path)?;
    let mut out = Vec::new();
    match m {
        0xa1b2_c3d4 | 0xd4c3_b2a1 | 0xa1b2_3c4d | 0x4d3c_b2a1 => {
            let mut r = PcapReader::new(file)
                .with_context(|| format!("{}: bad pcap header", path.display()))?;
            let link = r.header().datalink;
            while let Some(pkt) = r.next_packet() {
                let pkt = pkt.with_context(|| format!("{}: bad pcap record", path.display()))?;
                out.push(to_ethernet(link, &pkt.data, path)?);
            }
        }
        0x0a0d_0d0a => {
            let mut r = PcapNgReader::new(file)
                .with_context(|| format!("{}: bad pcapng header", path.display()))?;
            let mut links = Vec::new();
            while let Some(block) = r.next_block() {
                match block.with_context(|| format!("{}: bad pcapng block", path.display()))? {
                    Block::InterfaceDescription(idb) => links.push(idb.linktype),
                    Block::EnhancedPacket(epb) => {
                        let link = links
                            .get(epb.interface_id as usize)
                            .copied()
                            .unwrap_or(DataLink::ETHERNET);
                        out.push(to_ethernet(link, &epb.data, path)?);
                    }
                    Block::SimplePacket(spb) => {
                        let link = links.first().copied().unwrap_or(DataLink::ETHERNET);
                        out.push(to_ethernet(link, &spb.data, path)?);
                    }
                    _ => {}
                }
            }
        }
        _ => return Ok(None),
    }
    Ok(Some(out))
}

/// Ethernet frames pass as they are; raw IP captures get a synthetic
/// Ethernet header so one parser handles both.
fn to_ethernet(link: DataLink, data: &[u8], path: &Path) -> Result<Vec<u8>> {
    let ethertype: [u8; 2] = match link {
        DataLink::ETHERNET => return Ok(data.to_vec()),
        DataLink::RAW | DataLink::IPV4 | DataLink::IPV6 => match data.first().map(|b| b >> 4) {
            Some(6) => [0x86, 0xdd],
            _ => [0x08, 0x00],
        },
        other => bail!(
            "{}: link type {other:?} is not supported (Ethernet or raw IP captures only)",
            path.display()
        ),
    };
    let mut f = vec![0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01];
    f.extend_from_slice(&ethertype);
    f.extend_from_slice(data);
    Ok(f)
}

/// Parses one frame as the dataplane does.
pub fn classify_frame(frame: &[u8]) -> TraceItem {
    let (status, k, area) = parse_frame_tcp(frame, frame.len() as u32, 0);
    match status {
        ParseStatus::Ok => {}
        ParseStatus::NotIp => {
            return TraceItem::Unclassified {
                passes: true,
                why: "not IP",
            }
        }
        ParseStatus::Truncated => {
            return TraceItem::Unclassified {
                passes: false,
                why: "truncated",
            }
        }
        ParseStatus::Malformed => {
            return TraceItem::Unclassified {
                passes: false,
                why: "malformed",
            }
        }
        ParseStatus::ExtLimit => {
            return TraceItem::Unclassified {
                passes: false,
                why: "too many headers",
            }
        }
    }
    let (family, src, dst) = if k.family == 6 {
        (
            Family::V6,
            u128::from_be_bytes(k.src),
            u128::from_be_bytes(k.dst),
        )
    } else {
        let v4 = |b: &[u8; 16]| u32::from_be_bytes([b[12], b[13], b[14], b[15]]) as u128;
        (Family::V4, v4(&k.src), v4(&k.dst))
    };
    let mut p = Packet::new(family, src, dst, k.proto, k.sport, k.dport);
    p.icmp_type = k.icmp_type;
    p.icmp_code = k.icmp_code;
    p.tcp_flags = k.tcp_flags;
    p.fragment = k.frag & parapet_dataplane::abi::FRAG_LATER != 0;
    p.len = k.pkt_len;
    // the option area `--tcp-option` reads (a data offset past the
    // datagram: none, which the model does not tell apart; the dataplane
    // drops such a segment while its images test options)
    if let TcpOptionArea::At(r) = area {
        p.tcp_options = frame.get(r).map(Box::from);
    }
    // the datagram from its IP header (`-m string` searches it): after
    // the Ethernet header and up to two VLAN tags, the L3 length
    p.datagram = datagram_of(frame, p.len as usize).map(Box::from);
    // A capture carries no conntrack state; as for text traces, each packet
    // is taken as the first of its flow.
    p.ct_state = CtState::New;
    TraceItem::Packet(p)
}

/// The bytes of `frame`'s datagram (its IP header on, `len` of them, or
/// what the frame holds), past the Ethernet header and up to two VLAN
/// tags.
fn datagram_of(frame: &[u8], len: usize) -> Option<&[u8]> {
    let mut at = 12;
    for _ in 0..2 {
        if matches!(frame.get(at..at + 2)?, [0x81, 0x00] | [0x88, 0xa8]) {
            at += 4;
        }
    }
    let l3 = frame.get(at + 2..)?;
    Some(&l3[..len.min(l3.len())])
}
