//! The generated program's packet parser: the same decisions as
//! `bpf/lib/parse.h` (and its twin `src/frame/parse.rs`) — Ethernet, up to
//! two VLAN tags, IPv4 or IPv6 with its extension chain (at most eight
//! headers, unrolled), the transport header at its fixed size — written
//! as straight-line code that leaves the fields the rules read in stack
//! slots. Statuses become verdicts here, as `parapet_decide` makes them:
//! a frame that is not IP passes, a truncated, malformed or too deeply
//! nested one is dropped.
//!
//! Registers while parsing: r6 = data, r7 = data_end, r8 = the current
//! header offset, r9 = the frame length, then the IP datagram's end.

use super::asm::{Alu, Asm, Cond, Label, Reg, Size, FP, R0, R1, R2, R3, R4, R5, R6, R7, R8, R9};

/// `XDP_DROP`, `XDP_PASS`.
pub(crate) const XDP_DROP: i32 = 1;
pub(crate) const XDP_PASS: i32 = 2;

/// `PARAPET_MAX_OFF` (parapet.h): a header starting beyond it is truncated.
const MAX_OFF: i32 = 1024;
/// `PARAPET_MAX_EXT_HDRS`, `PARAPET_MAX_VLAN_TAGS`.
const MAX_EXT_HDRS: usize = 8;
const MAX_VLAN_TAGS: usize = 2;

/// A parsed field's stack slot (8 bytes each below the frame pointer).
/// The addresses are 128-bit numbers in two slots, high half first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Slot {
    Family,
    Proto,
    SrcPort,
    DstPort,
    /// ICMP `type << 8 | code`.
    Icmp,
    TcpFlags,
    /// 1 for a non-first fragment.
    Fragment,
    Ttl,
    Dscp,
    Length,
    SrcHi,
    SrcLo,
    DstHi,
    DstLo,
}

impl Slot {
    pub(crate) const ALL: [Slot; 14] = [
        Slot::Family,
        Slot::Proto,
        Slot::SrcPort,
        Slot::DstPort,
        Slot::Icmp,
        Slot::TcpFlags,
        Slot::Fragment,
        Slot::Ttl,
        Slot::Dscp,
        Slot::Length,
        Slot::SrcHi,
        Slot::SrcLo,
        Slot::DstHi,
        Slot::DstLo,
    ];

    /// The slot's offset from the frame pointer.
    pub(crate) fn off(self) -> i16 {
        -8 * (self as i16 + 1)
    }
}

/// Which slots the rules read: the parser stores only those.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Used(u16);

impl Used {
    pub(crate) fn add(&mut self, s: Slot) {
        self.0 |= 1 << s as u16;
    }
    pub(crate) fn has(self, s: Slot) -> bool {
        self.0 & (1 << s as u16) != 0
    }
}

/// Where the parser sends a frame.
pub(crate) struct Exits {
    /// Parsed: the rules decide (fields in their slots).
    pub(crate) classify: Label,
    /// Truncated, malformed or nested too deep: dropped.
    pub(crate) drop: Label,
    /// Not IP: passed unclassified.
    pub(crate) pass: Label,
}

struct Parser<'a> {
    a: &'a mut Asm,
    used: Used,
    exits: &'a Exits,
    /// A non-first IPv6 fragment (its protocol in r2): no transport
    /// header, the rules decide.
    later_fragment6: Label,
}

/// Emits the parser; every path ends at one of `exits`.
pub(crate) fn emit_parser(a: &mut Asm, used: Used, exits: &Exits) {
    let later_fragment6 = a.label();
    let mut p = Parser {
        a,
        used,
        exits,
        later_fragment6,
    };
    let (v4, v6, l4_v4, l4_v6) = (p.a.label(), p.a.label(), p.a.label(), p.a.label());
    p.ethernet(v4, v6);
    p.a.bind(v4);
    p.ipv4(l4_v4);
    p.a.bind(l4_v4);
    p.transport(1);
    p.a.bind(v6);
    p.ipv6(l4_v6);
    p.a.bind(l4_v6);
    p.transport(58);
    p.a.bind(later_fragment6);
    p.put_imm(Slot::Fragment, 1);
    p.put(Slot::Proto, R2);
    p.a.ja(exits.classify);
}

impl Parser<'_> {
    /// `slot = reg`, when a rule reads the slot.
    fn put(&mut self, slot: Slot, reg: Reg) {
        if self.used.has(slot) {
            self.a.store(FP, slot.off(), reg);
        }
    }

    fn put_imm(&mut self, slot: Slot, v: i32) {
        if self.used.has(slot) {
            self.a.store_imm(FP, slot.off(), v);
        }
    }

    /// `ptr = data + off`, dropping the frame unless `len` bytes from there
    /// are in the packet (HDR_AT: `off` at most MAX_OFF, which also gives
    /// the verifier the offset's bound).
    fn header_at(&mut self, ptr: Reg, off: Reg, len: i32) {
        let a = &mut *self.a;
        a.jmp_imm(Cond::Gt, off, MAX_OFF, self.exits.drop);
        a.alu_reg(Alu::Mov, ptr, R6);
        a.alu_reg(Alu::Add, ptr, off);
        a.alu_reg(Alu::Mov, R5, ptr);
        a.alu_imm(Alu::Add, R5, len);
        a.jmp_reg(Cond::Gt, R5, R7, self.exits.drop);
    }

    /// `dst = ntoh(*(size *)(src + off))`.
    fn load_be(&mut self, size: Size, dst: Reg, src: Reg, off: i16) {
        self.a.load(size, dst, src, off);
        let bits = match size {
            Size::B => return,
            Size::H => 16,
            Size::W => 32,
            Size::Dw => 64,
        };
        self.a.be(dst, bits);
    }

    fn ethernet(&mut self, v4: Label, v6: Label) {
        let a = &mut *self.a;
        a.load(Size::W, R6, R1, 0); // xdp_md.data
        a.load(Size::W, R7, R1, 4); // xdp_md.data_end
        a.alu_reg(Alu::Mov, R9, R7);
        a.alu_reg(Alu::Sub, R9, R6);
        for s in Slot::ALL {
            self.put_imm(s, 0);
        }
        self.a.alu_imm(Alu::Mov, R8, 0);
        self.header_at(R3, R8, 14);
        self.load_be(Size::H, R2, R3, 12);
        self.a.alu_imm(Alu::Mov, R8, 14);
        for _ in 0..MAX_VLAN_TAGS {
            let (tag, untagged) = (self.a.label(), self.a.label());
            self.a.jmp_imm(Cond::Eq, R2, 0x8100, tag);
            self.a.jmp_imm(Cond::Ne, R2, 0x88a8, untagged);
            self.a.bind(tag);
            self.header_at(R3, R8, 4);
            self.load_be(Size::H, R2, R3, 2);
            self.a.alu_imm(Alu::Add, R8, 4);
            self.a.bind(untagged);
        }
        // a third tag: refused rather than passed unfiltered
        let a = &mut *self.a;
        a.jmp_imm(Cond::Eq, R2, 0x8100, self.exits.drop);
        a.jmp_imm(Cond::Eq, R2, 0x88a8, self.exits.drop);
        a.jmp_imm(Cond::Eq, R2, 0x0800, v4);
        a.jmp_imm(Cond::Eq, R2, 0x86dd, v6);
        a.ja(self.exits.pass);
    }

    /// IPv4 at r8; leaves the protocol in r2, r8 at the transport header,
    /// r9 at the datagram's end.
    fn ipv4(&mut self, l4: Label) {
        let drop = self.exits.drop;
        self.header_at(R3, R8, 20);
        let a = &mut *self.a;
        a.load(Size::B, R4, R3, 0);
        a.alu_reg(Alu::Mov, R5, R4);
        a.alu_imm(Alu::Rsh, R5, 4);
        a.jmp_imm(Cond::Ne, R5, 4, drop);
        a.alu_imm(Alu::And, R4, 0xf);
        a.jmp_imm(Cond::Lt, R4, 5, drop);
        a.alu_imm(Alu::Lsh, R4, 2); // header length
        a.alu_reg(Alu::Mov, R5, R9);
        a.alu_reg(Alu::Sub, R5, R8); // what the frame holds from here
        self.load_be(Size::H, R0, R3, 2); // total length
        let a = &mut *self.a;
        let stated = a.label();
        a.jmp_imm(Cond::Ne, R0, 0, stated);
        // 0 is legal for GSO "BIG TCP" packets: what we have
        a.alu_reg(Alu::Mov, R0, R5);
        a.bind(stated);
        a.jmp_reg(Cond::Lt, R0, R4, drop);
        a.jmp_reg(Cond::Gt, R0, R5, drop);
        self.put_imm(Slot::Family, 4);
        self.put(Slot::Length, R0);
        let a = &mut *self.a;
        a.alu_reg(Alu::Mov, R9, R8);
        a.alu_reg(Alu::Add, R9, R0);
        a.alu_reg(Alu::Add, R8, R4);
        if self.used.has(Slot::Ttl) {
            self.a.load(Size::B, R0, R3, 8);
            self.put(Slot::Ttl, R0);
        }
        if self.used.has(Slot::Dscp) {
            self.a.load(Size::B, R0, R3, 1);
            self.a.alu_imm(Alu::Rsh, R0, 2);
            self.put(Slot::Dscp, R0);
        }
        for (slot, at) in [(Slot::SrcLo, 12), (Slot::DstLo, 16)] {
            if self.used.has(slot) {
                self.load_be(Size::W, R0, R3, at);
                self.put(slot, R0);
            }
        }
        self.a.load(Size::B, R2, R3, 9);
        self.put(Slot::Proto, R2);
        self.load_be(Size::H, R0, R3, 6);
        let a = &mut *self.a;
        a.alu_imm(Alu::And, R0, 0x1fff);
        a.jmp_imm(Cond::Eq, R0, 0, l4);
        // a non-first fragment: no transport header, ports stay 0
        self.put_imm(Slot::Fragment, 1);
        self.a.ja(self.exits.classify);
    }

    /// IPv6 at r8, its extension chain walked (unrolled); leaves the
    /// protocol in r2 as `ipv4` does.
    fn ipv6(&mut self, l4: Label) {
        let drop = self.exits.drop;
        self.header_at(R3, R8, 40);
        let a = &mut *self.a;
        a.load(Size::B, R4, R3, 0);
        a.alu_imm(Alu::Rsh, R4, 4);
        a.jmp_imm(Cond::Ne, R4, 6, drop);
        a.alu_reg(Alu::Mov, R5, R9);
        a.alu_reg(Alu::Sub, R5, R8);
        self.load_be(Size::H, R0, R3, 4); // payload length
        let a = &mut *self.a;
        let (stated, known) = (a.label(), a.label());
        a.jmp_imm(Cond::Ne, R0, 0, stated);
        // 0: a jumbogram or BIG TCP; what we have
        a.alu_reg(Alu::Mov, R0, R5);
        a.ja(known);
        a.bind(stated);
        a.alu_imm(Alu::Add, R0, 40);
        a.bind(known);
        a.jmp_reg(Cond::Gt, R0, R5, drop);
        self.put_imm(Slot::Family, 6);
        self.put(Slot::Length, R0);
        self.a.alu_reg(Alu::Mov, R9, R8);
        self.a.alu_reg(Alu::Add, R9, R0);
        if self.used.has(Slot::Ttl) {
            self.a.load(Size::B, R0, R3, 7);
            self.put(Slot::Ttl, R0);
        }
        if self.used.has(Slot::Dscp) {
            // the traffic class: byte 0's low nibble, byte 1's high one
            let a = &mut *self.a;
            a.load(Size::B, R0, R3, 0);
            a.alu_imm(Alu::And, R0, 0xf);
            a.alu_imm(Alu::Lsh, R0, 2);
            a.load(Size::B, R4, R3, 1);
            a.alu_imm(Alu::Rsh, R4, 6);
            a.alu_reg(Alu::Or, R0, R4);
            self.put(Slot::Dscp, R0);
        }
        for (slot, at) in [
            (Slot::SrcHi, 8),
            (Slot::SrcLo, 16),
            (Slot::DstHi, 24),
            (Slot::DstLo, 32),
        ] {
            if self.used.has(slot) {
                self.load_be(Size::Dw, R0, R3, at);
                self.put(slot, R0);
            }
        }
        self.a.load(Size::B, R2, R3, 6);
        self.a.alu_imm(Alu::Add, R8, 40);
        let upper = self.a.label();
        for _ in 0..MAX_EXT_HDRS {
            self.extension(upper);
        }
        // still an extension header after the last one walked: refused
        self.jump_if_extension(drop);
        self.a.bind(upper);
        self.put(Slot::Proto, R2);
        self.a.ja(l4);
    }

    /// `if is_ipv6_ext(r2) goto to`.
    fn jump_if_extension(&mut self, to: Label) {
        for nh in [0, 43, 44, 51, 60, 135, 139, 140] {
            self.a.jmp_imm(Cond::Eq, R2, nh, to);
        }
    }

    /// One step of the extension chain: header r2 at r8; not an extension
    /// header goes to `upper`.
    fn extension(&mut self, upper: Label) {
        let drop = self.exits.drop;
        let a = &mut *self.a;
        let (ext, frag, ah, next) = (a.label(), a.label(), a.label(), a.label());
        a.jmp_imm(Cond::Eq, R2, 44, frag);
        a.jmp_imm(Cond::Eq, R2, 51, ah);
        for nh in [0, 43, 60, 135, 139, 140] {
            a.jmp_imm(Cond::Eq, R2, nh, ext);
        }
        a.ja(upper);
        // the fragment header
        a.bind(frag);
        self.header_8(R3);
        self.load_be(Size::H, R0, R3, 2);
        let a = &mut *self.a;
        a.load(Size::B, R2, R3, 0);
        a.alu_imm(Alu::Mov, R4, 8);
        a.jmp_imm(Cond::Set, R0, 0xfff8, self.later_fragment6);
        a.ja(next);
        // AH: (len + 2) * 4 bytes
        a.bind(ah);
        self.header_8(R3);
        let a = &mut *self.a;
        a.load(Size::B, R4, R3, 1);
        a.alu_imm(Alu::Add, R4, 2);
        a.alu_imm(Alu::Lsh, R4, 2);
        a.load(Size::B, R2, R3, 0);
        a.ja(next);
        // options and routing headers: (len + 1) * 8 bytes, all in the datagram
        a.bind(ext);
        self.header_8(R3);
        let a = &mut *self.a;
        a.load(Size::B, R4, R3, 1);
        a.alu_imm(Alu::Add, R4, 1);
        a.alu_imm(Alu::Lsh, R4, 3);
        a.alu_reg(Alu::Mov, R5, R8);
        a.alu_reg(Alu::Add, R5, R4);
        a.jmp_reg(Cond::Gt, R5, R9, drop);
        a.load(Size::B, R2, R3, 0);
        a.bind(next);
        a.alu_reg(Alu::Add, R8, R4);
        a.jmp_imm(Cond::Gt, R8, MAX_OFF, drop);
    }

    /// The 8 bytes of an extension header at r8, in the packet and in the
    /// datagram.
    fn header_8(&mut self, ptr: Reg) {
        self.header_at(ptr, R8, 8);
        let a = &mut *self.a;
        a.alu_reg(Alu::Mov, R5, R8);
        a.alu_imm(Alu::Add, R5, 8);
        a.jmp_reg(Cond::Gt, R5, R9, self.exits.drop);
    }

    /// The transport header of protocol r2 at r8 (datagram end r9), for
    /// the family whose ICMP is `icmp`.
    fn transport(&mut self, icmp: i32) {
        let a = &mut *self.a;
        let (tcp, ports8, ports12, icmp_l) = (a.label(), a.label(), a.label(), a.label());
        let ports = a.label();
        a.jmp_imm(Cond::Eq, R2, 6, tcp);
        a.jmp_imm(Cond::Eq, R2, 17, ports8);
        a.jmp_imm(Cond::Eq, R2, 136, ports8);
        a.jmp_imm(Cond::Eq, R2, 132, ports12);
        a.jmp_imm(Cond::Eq, R2, 33, ports12);
        a.jmp_imm(Cond::Eq, R2, icmp, icmp_l);
        // no ports to read: addresses and protocol decide
        a.ja(self.exits.classify);
        a.bind(tcp);
        self.l4_header(20);
        let a = &mut *self.a;
        a.load(Size::B, R0, R3, 12);
        a.alu_imm(Alu::Rsh, R0, 4);
        a.jmp_imm(Cond::Lt, R0, 5, self.exits.drop);
        if self.used.has(Slot::TcpFlags) {
            self.a.load(Size::B, R0, R3, 13);
            self.put(Slot::TcpFlags, R0);
        }
        self.a.ja(ports);
        self.a.bind(ports8);
        self.l4_header(8);
        self.a.ja(ports);
        self.a.bind(ports12);
        self.l4_header(12);
        self.a.bind(ports);
        for (slot, at) in [(Slot::SrcPort, 0), (Slot::DstPort, 2)] {
            if self.used.has(slot) {
                self.load_be(Size::H, R0, R3, at);
                self.put(slot, R0);
            }
        }
        self.a.ja(self.exits.classify);
        self.a.bind(icmp_l);
        self.l4_header(4);
        if self.used.has(Slot::Icmp) {
            self.load_be(Size::H, R0, R3, 0);
            self.put(Slot::Icmp, R0);
        }
        self.a.ja(self.exits.classify);
    }

    /// r3 = the transport header of `need` bytes at r8, which must fit in
    /// the datagram (r9) and in the packet.
    fn l4_header(&mut self, need: i32) {
        let a = &mut *self.a;
        a.alu_reg(Alu::Mov, R5, R8);
        a.alu_imm(Alu::Add, R5, need);
        a.jmp_reg(Cond::Gt, R5, R9, self.exits.drop);
        self.header_at(R3, R8, need);
    }
}
