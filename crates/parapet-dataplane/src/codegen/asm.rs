//! A small eBPF assembler: the instruction encoding (uapi
//! `struct bpf_insn`, the opcodes of `linux/bpf_common.h` and
//! `linux/bpf.h`), forward and backward labels, and the jump offsets fixed
//! up once every label is bound. Only what the generated program needs.

/// A register: r0 (return value) … r10 (frame pointer, read-only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reg(pub(crate) u8);

pub(crate) const R0: Reg = Reg(0);
pub(crate) const R1: Reg = Reg(1);
pub(crate) const R2: Reg = Reg(2);
pub(crate) const R3: Reg = Reg(3);
pub(crate) const R4: Reg = Reg(4);
pub(crate) const R5: Reg = Reg(5);
pub(crate) const R6: Reg = Reg(6);
pub(crate) const R7: Reg = Reg(7);
pub(crate) const R8: Reg = Reg(8);
pub(crate) const R9: Reg = Reg(9);
pub(crate) const FP: Reg = Reg(10);

// instruction classes
const LD: u8 = 0x00;
const LDX: u8 = 0x01;
const ST: u8 = 0x02;
const STX: u8 = 0x03;
const ALU: u8 = 0x04;
const JMP: u8 = 0x05;
const JMP32: u8 = 0x06;
const ALU64: u8 = 0x07;
// load/store sizes and modes
const DW: u8 = 0x18;
const IMM: u8 = 0x00;
const MEM: u8 = 0x60;
// operand source: the immediate or a register
const K: u8 = 0x00;
const X: u8 = 0x08;

/// A memory access size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Size {
    B,
    H,
    W,
    Dw,
}

impl Size {
    fn code(self) -> u8 {
        match self {
            Size::W => 0x00,
            Size::H => 0x08,
            Size::B => 0x10,
            Size::Dw => DW,
        }
    }
}

/// 64-bit ALU operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Alu {
    Add,
    Sub,
    Or,
    And,
    Lsh,
    Rsh,
    Mov,
    Xor,
}

impl Alu {
    fn code(self) -> u8 {
        match self {
            Alu::Add => 0x00,
            Alu::Sub => 0x10,
            Alu::Or => 0x40,
            Alu::And => 0x50,
            Alu::Lsh => 0x60,
            Alu::Rsh => 0x70,
            Alu::Mov => 0xb0,
            Alu::Xor => 0xa0,
        }
    }
}

/// Conditional jumps, all unsigned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cond {
    Eq,
    Ne,
    Gt,
    Lt,
    /// `dst & src != 0`
    Set,
}

impl Cond {
    fn code(self) -> u8 {
        match self {
            Cond::Eq => 0x10,
            Cond::Gt => 0x20,
            Cond::Set => 0x40,
            Cond::Ne => 0x50,
            Cond::Lt => 0xa0,
        }
    }
}

/// A jump target, bound to an instruction index by [`Asm::bind`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Label(usize);

/// One encoded instruction (`struct bpf_insn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Insn {
    code: u8,
    dst: u8,
    src: u8,
    off: i16,
    imm: i32,
}

impl Insn {
    fn bytes(self) -> [u8; 8] {
        let o = self.off.to_le_bytes();
        let i = self.imm.to_le_bytes();
        [
            self.code,
            self.src << 4 | self.dst,
            o[0],
            o[1],
            i[0],
            i[1],
            i[2],
            i[3],
        ]
    }
}

/// The program under construction.
#[derive(Default)]
pub(crate) struct Asm {
    insns: Vec<Insn>,
    /// Where each label is bound (`None` until [`Asm::bind`]).
    labels: Vec<Option<usize>>,
    /// (jump instruction index, its target).
    fixups: Vec<(usize, Label)>,
    /// Conditional jumps emitted.
    branches: usize,
    /// `gotol` instructions (their offset is in the immediate).
    long_jumps: Vec<usize>,
}

/// Why a program could not be assembled.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum AsmError {
    /// A jump targets a label that was never bound.
    Unbound,
    /// A jump is longer than the 16-bit offset reaches.
    TooFar,
}

impl Asm {
    /// A fresh label.
    pub(crate) fn label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() - 1)
    }

    /// The next instruction emitted is `l`'s target.
    pub(crate) fn bind(&mut self, l: Label) {
        debug_assert!(self.labels[l.0].is_none(), "label bound twice");
        self.labels[l.0] = Some(self.insns.len());
    }

    fn push(&mut self, code: u8, dst: Reg, src: Reg, off: i16, imm: i32) {
        self.insns.push(Insn {
            code,
            dst: dst.0,
            src: src.0,
            off,
            imm,
        });
    }

    /// `dst op= imm` (64-bit).
    pub(crate) fn alu_imm(&mut self, op: Alu, dst: Reg, imm: i32) {
        self.push(ALU64 | op.code() | K, dst, R0, 0, imm);
    }

    /// `dst op= src` (64-bit).
    pub(crate) fn alu_reg(&mut self, op: Alu, dst: Reg, src: Reg) {
        self.push(ALU64 | op.code() | X, dst, src, 0, 0);
    }

    /// `dst = imm` for any 64-bit value (one instruction when the
    /// immediate sign-extends to it, else the two-slot `ld_imm64`).
    pub(crate) fn mov_u64(&mut self, dst: Reg, v: u64) {
        if v <= i32::MAX as u64 {
            self.alu_imm(Alu::Mov, dst, v as i32);
        } else {
            self.push(LD | DW | IMM, dst, R0, 0, v as u32 as i32);
            self.push(0, R0, R0, 0, (v >> 32) as u32 as i32);
        }
    }

    /// `dst = be(dst)` for the low `bits` (16, 32 or 64) bits: network
    /// order to the host's number, upper bits zeroed.
    pub(crate) fn be(&mut self, dst: Reg, bits: i32) {
        // BPF_ALU | BPF_END | BPF_TO_BE
        self.push(ALU | 0xd0 | X, dst, R0, 0, bits);
    }

    /// `dst = *(size *)(src + off)`, zero-extended.
    pub(crate) fn load(&mut self, size: Size, dst: Reg, src: Reg, off: i16) {
        self.push(LDX | MEM | size.code(), dst, src, off, 0);
    }

    /// `*(u64 *)(dst + off) = src`.
    pub(crate) fn store(&mut self, dst: Reg, off: i16, src: Reg) {
        self.push(STX | MEM | DW, dst, src, off, 0);
    }

    /// `*(u64 *)(dst + off) = imm`.
    pub(crate) fn store_imm(&mut self, dst: Reg, off: i16, imm: i32) {
        self.push(ST | MEM | DW, dst, R0, off, imm);
    }

    /// `*(u32 *)(dst + off) = imm`.
    pub(crate) fn store_imm32(&mut self, dst: Reg, off: i16, imm: i32) {
        self.push(ST | MEM, dst, R0, off, imm);
    }

    /// `dst = the map behind fd` (`ld_imm64` with `BPF_PSEUDO_MAP_FD`: the
    /// verifier turns the fd into the map's address).
    pub(crate) fn ld_map_fd(&mut self, dst: Reg, fd: i32) {
        self.push(LD | DW | IMM, dst, R1, 0, fd);
        self.push(0, R0, R0, 0, 0);
    }

    /// `call helper` (r1..r5 arguments and clobbered, r0 the result).
    pub(crate) fn call(&mut self, helper: i32) {
        self.push(JMP | 0x80, R0, R0, 0, helper);
    }

    /// Instructions emitted so far (before unreachable code is left out).
    pub(crate) fn len(&self) -> usize {
        self.insns.len()
    }

    /// Sets the immediate of instruction `at` (a constant known only
    /// after it was emitted).
    pub(crate) fn set_imm(&mut self, at: usize, imm: i32) {
        self.insns[at].imm = imm;
    }

    /// Conditional jumps emitted so far.
    pub(crate) fn branches(&self) -> usize {
        self.branches
    }

    /// `if dst cond imm goto to` (64-bit compare; imm sign-extended).
    pub(crate) fn jmp_imm(&mut self, cond: Cond, dst: Reg, imm: i32, to: Label) {
        self.branches += 1;
        self.fixups.push((self.insns.len(), to));
        self.push(JMP | cond.code() | K, dst, R0, 0, imm);
    }

    /// `if dst cond src goto to` (64-bit compare).
    pub(crate) fn jmp_reg(&mut self, cond: Cond, dst: Reg, src: Reg, to: Label) {
        self.branches += 1;
        self.fixups.push((self.insns.len(), to));
        self.push(JMP | cond.code() | X, dst, src, 0, 0);
    }

    /// `goto to`.
    pub(crate) fn ja(&mut self, to: Label) {
        self.fixups.push((self.insns.len(), to));
        self.push(JMP, R0, R0, 0, 0);
    }

    /// `gotol to` (`BPF_JMP32 | BPF_JA`, kernel 6.4+): the 32-bit offset
    /// of the immediate, for a target beyond the 16-bit reach of `ja`.
    pub(crate) fn ja_long(&mut self, to: Label) {
        self.fixups.push((self.insns.len(), to));
        self.long_jumps.push(self.insns.len());
        self.push(JMP32, R0, R0, 0, 0);
    }

    /// `r0 = v; exit`.
    pub(crate) fn ret(&mut self, v: i32) {
        self.alu_imm(Alu::Mov, R0, v);
        self.push(JMP | 0x90, R0, R0, 0, 0);
    }

    /// The encoded program, jumps resolved. Code no path reaches (the
    /// entries after one that matches every packet, say) is left out: the
    /// verifier refuses a program with unreachable instructions.
    pub(crate) fn finish(self) -> Result<Vec<[u8; 8]>, AsmError> {
        let mut target = vec![None; self.insns.len()];
        for &(at, Label(l)) in &self.fixups {
            target[at] = Some(self.labels[l].ok_or(AsmError::Unbound)?);
        }
        let keep = self.reachable(&target);
        // new_at[i]: index of instruction i (or of the next kept one)
        let mut new_at = Vec::with_capacity(self.insns.len() + 1);
        let mut n = 0usize;
        for &k in &keep {
            new_at.push(n);
            n += usize::from(k);
        }
        new_at.push(n);
        let mut out = Vec::with_capacity(n);
        let mut long = vec![false; self.insns.len()];
        for &at in &self.long_jumps {
            long[at] = true;
        }
        for (i, insn) in self.insns.iter().enumerate() {
            if !keep[i] {
                continue;
            }
            let mut insn = *insn;
            if let Some(t) = target[i] {
                let off = new_at[t] as i64 - (new_at[i] as i64 + 1);
                if long[i] {
                    insn.imm = i32::try_from(off).map_err(|_| AsmError::TooFar)?;
                } else {
                    insn.off = i16::try_from(off).map_err(|_| AsmError::TooFar)?;
                }
            }
            out.push(insn.bytes());
        }
        Ok(out)
    }

    /// Which instructions some path from the first reaches.
    fn reachable(&self, target: &[Option<usize>]) -> Vec<bool> {
        let mut seen = vec![false; self.insns.len()];
        let mut todo = vec![0usize];
        while let Some(i) = todo.pop() {
            if i >= self.insns.len() || seen[i] {
                continue;
            }
            seen[i] = true;
            let code = self.insns[i].code;
            if code == LD | DW | IMM {
                // the second half of an ld_imm64 goes with the first
                seen[i + 1] = true;
                todo.push(i + 2);
                continue;
            }
            if let Some(t) = target[i] {
                todo.push(t);
            }
            // exit, goto and gotol do not fall through
            if code != JMP | 0x90 && code != JMP && code != JMP32 {
                todo.push(i + 1);
            }
        }
        seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_as_the_kernel_headers_say() {
        let mut a = Asm::default();
        let end = a.label();
        a.load(Size::W, R6, R1, 4); // r6 = *(u32 *)(r1 + 4)
        a.jmp_imm(Cond::Ne, R2, 0x800, end); // if r2 != 0x800 goto end
        a.mov_u64(R3, 0xffff_ffff); // ld_imm64 r3, 0xffffffff
        a.be(R2, 16);
        a.bind(end);
        a.ret(2);
        let p = a.finish().unwrap();
        assert_eq!(p[0], [0x61, 0x16, 4, 0, 0, 0, 0, 0]);
        // offset 3: past the two-slot ld_imm64 and the byte swap
        assert_eq!(p[1], [0x55, 0x02, 3, 0, 0x00, 0x08, 0, 0]);
        assert_eq!(p[2], [0x18, 0x03, 0, 0, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(p[3], [0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(p[4], [0xdc, 0x02, 0, 0, 16, 0, 0, 0]);
        assert_eq!(p[5], [0xb7, 0x00, 0, 0, 2, 0, 0, 0]);
        assert_eq!(p[6], [0x95, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn leaves_out_what_no_path_reaches() {
        let mut a = Asm::default();
        let end = a.label();
        a.ja(end);
        a.mov_u64(R3, 1 << 40); // unreachable, two slots
        a.ret(1); // unreachable
        a.bind(end);
        a.ret(2);
        let p = a.finish().unwrap();
        assert_eq!(p.len(), 3);
        assert_eq!(p[0], [0x05, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(p[1], [0xb7, 0x00, 0, 0, 2, 0, 0, 0]);
    }

    #[test]
    fn long_jumps_carry_their_offset_in_the_immediate() {
        let mut a = Asm::default();
        let end = a.label();
        a.ja_long(end);
        a.ret(1); // unreachable: left out
        a.bind(end);
        a.alu_reg(Alu::Xor, R2, R3);
        a.ret(2);
        let p = a.finish().unwrap();
        assert_eq!(p[0], [0x06, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(p[1], [0xaf, 0x32, 0, 0, 0, 0, 0, 0]);
        let mut far = Asm::default();
        let end = far.label();
        far.ja_long(end);
        for _ in 0..40_000 {
            far.alu_imm(Alu::Add, R2, 1);
        }
        far.bind(end);
        far.ret(2);
        let p = far.finish().unwrap();
        assert_eq!(p.len(), 3, "the skipped additions are unreachable");
        let mut reach = Asm::default();
        let end = reach.label();
        let skip = reach.label();
        reach.jmp_imm(Cond::Eq, R1, 0, skip);
        reach.ja_long(end);
        reach.bind(skip);
        for _ in 0..40_000 {
            reach.alu_imm(Alu::Add, R2, 1);
        }
        reach.bind(end);
        reach.ret(2);
        let p = reach.finish().unwrap();
        assert_eq!(p[1][4..8], 40_000i32.to_le_bytes());
    }

    #[test]
    fn refuses_an_unbound_label() {
        let mut a = Asm::default();
        let nowhere = a.label();
        a.ja(nowhere);
        assert_eq!(a.finish(), Err(AsmError::Unbound));
    }
}
