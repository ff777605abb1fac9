//! Ethernet frames, the wire format the program reads: [`parse`] turns one
//! into the [`PacketKey`](crate::PacketKey) the BPF parser computes,
//! [`build`] writes crafted ones (and the frame of a model packet) for
//! tests, replays and benchmarks, [`reply`] the TCP reset or ICMP error
//! answering a rejected packet (sent by parapetd for the netfilter hooks). Everything is re-exported here.

pub mod build;
pub mod parse;
pub mod reply;

pub use build::{frame_of_packet, ipv4_checksum, Ext, Frame, L3, L4};
pub use parse::{is_ipv6_ext, parse_frame, parse_frame_tcp, TcpOptionArea};
pub use reply::{reject_reply, reply_kind, Reply, ReplyKind};
