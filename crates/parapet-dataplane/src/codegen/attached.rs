//! The generated program as parapetd attaches it at XDP: the program
//! that goes on the link ([`load_attached`]; which engine a chain gets is
//! `choice.rs`) — the same straight-line code, counting into the
//! main program's own maps (per-rule counters by rule id, the packets
//! statistic), so `parapet counters`, `list --counters` and `stats` read
//! it through the same code as the walker. docs/dataplane.md, "Generated
//! programs".

use std::ffi::CString;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

use parapet_model::DecisionList;

use super::asm::{Alu, Asm, Cond, Size, FP, R0, R1, R2, R6};
use super::parse::{self, Slot};
use super::rules::{self, ineligible};
use crate::error::{Error, Result};

/// The kernel name of an attached generated program: how `stats` and a
/// restarted parapetd tell it from the walker on a link (the walker's is
/// `parapet_xdp`).
pub const GENERATED_PROG_NAME: &str = "parapet_gen";

/// The kernel name of an attached tree program (the tree form,
/// `tree/counted.rs`).
pub const GENERATED_TREE_PROG_NAME: &str = "parapet_gentree";

/// Stack slots of the attached program's own, below the parser's slots
/// and the rules' counter key: a map key, whether the per-packet
/// statistics are on, the ingress interface.
const STATS_KEY: i16 = -8 * (Slot::ALL.len() as i16 + 2);
pub(super) const STATS_ON: i16 = STATS_KEY - 8;
pub(super) const IFINDEX: i16 = STATS_KEY - 16;

/// `xdp_md.ingress_ifindex`.
const XDP_MD_INGRESS_IFINDEX: i16 = 12;

/// `BPF_FUNC_map_lookup_elem`.
const MAP_LOOKUP_ELEM: i32 = 1;

/// `stats[idx] += 1` in the per-CPU `u64` array behind `stats`
/// (clobbers r0–r5).
pub(super) fn count_stat(a: &mut Asm, stats: i32, idx: u32) {
    a.store_imm32(FP, STATS_KEY, idx as i32);
    a.ld_map_fd(R1, stats);
    a.alu_reg(Alu::Mov, R2, FP);
    a.alu_imm(Alu::Add, R2, i32::from(STATS_KEY));
    a.call(MAP_LOOKUP_ELEM);
    let none = a.label();
    a.jmp_imm(Cond::Eq, R0, 0, none);
    a.load(Size::Dw, R1, R0, 0);
    a.alu_imm(Alu::Add, R1, 1);
    a.store(R0, 0, R1);
    a.bind(none);
}

/// The prologue: the ingress interface kept for the hook statistics, and
/// unless `config[CFG_STATS_OFF]` is set (`stats_on` in the main
/// program) the packet counted in `stats[Stat::Packets]` and the switch
/// noted for the exits; the context (r1, where the parser starts) kept in
/// r6 across the lookups.
pub(super) fn count_packet(a: &mut Asm, maps: &Maps<'_>) {
    a.alu_reg(Alu::Mov, R6, R1);
    a.load(Size::W, R2, R1, XDP_MD_INGRESS_IFINDEX);
    a.store(FP, IFINDEX, R2);
    a.store_imm(FP, STATS_ON, 0);
    a.store_imm32(FP, STATS_KEY, crate::load::CFG_STATS_OFF as i32);
    a.ld_map_fd(R1, maps.config.as_raw_fd());
    a.alu_reg(Alu::Mov, R2, FP);
    a.alu_imm(Alu::Add, R2, i32::from(STATS_KEY));
    a.call(MAP_LOOKUP_ELEM);
    let (on, done) = (a.label(), a.label());
    a.jmp_imm(Cond::Eq, R0, 0, on);
    a.load(Size::W, R1, R0, 0);
    a.jmp_imm(Cond::Ne, R1, 0, done);
    a.bind(on);
    a.store_imm(FP, STATS_ON, 1);
    count_stat(a, maps.stats.as_raw_fd(), crate::abi::Stat::Packets as u32);
    a.bind(done);
    a.alu_reg(Alu::Mov, R1, R6);
}

/// An exit: the hook statistics' XDP row counts the packet (`count_hook`
/// in the main program: the column of its interface, or 0 from
/// `HOOK_IFACES` on; its L3 length; dropped or not) while the switch is
/// on, then the program returns `verdict`.
pub(super) fn exit_counted(a: &mut Asm, hook_stats: i32, verdict: i32) {
    let ret = a.label();
    a.load(Size::Dw, R1, FP, STATS_ON);
    a.jmp_imm(Cond::Eq, R1, 0, ret);
    a.load(Size::Dw, R1, FP, IFINDEX);
    let column = a.label();
    a.jmp_imm(Cond::Lt, R1, crate::abi::HOOK_IFACES as i32, column);
    a.alu_imm(Alu::Mov, R1, 0);
    a.bind(column);
    // the XDP row is row 0: the index is the column
    a.store(FP, STATS_KEY, R1);
    a.ld_map_fd(R1, hook_stats);
    a.alu_reg(Alu::Mov, R2, FP);
    a.alu_imm(Alu::Add, R2, i32::from(STATS_KEY));
    a.call(MAP_LOOKUP_ELEM);
    a.jmp_imm(Cond::Eq, R0, 0, ret);
    a.load(Size::Dw, R1, R0, 0);
    a.alu_imm(Alu::Add, R1, 1);
    a.store(R0, 0, R1);
    a.load(Size::Dw, R1, R0, 8);
    a.load(Size::Dw, R2, FP, Slot::Length.off());
    a.alu_reg(Alu::Add, R1, R2);
    a.store(R0, 8, R1);
    if verdict != parse::XDP_PASS {
        a.load(Size::Dw, R1, R0, 16);
        a.alu_imm(Alu::Add, R1, 1);
        a.store(R0, 16, R1);
    }
    a.bind(ret);
    a.ret(verdict);
}

/// The main program's maps the attached program counts in.
#[derive(Clone, Copy, Debug)]
pub struct Maps<'a> {
    /// `parapet_counters`: per rule id, `{packets, bytes}` per CPU.
    pub counters: BorrowedFd<'a>,
    /// `parapet_stats`: per statistic, a `u64` per CPU.
    pub stats: BorrowedFd<'a>,
    /// `parapet_config`: the per-packet statistics switch.
    pub config: BorrowedFd<'a>,
    /// `parapet_hook_stats`: per hook and interface, `{packets, bytes,
    /// dropped}` per CPU.
    pub hook_stats: BorrowedFd<'a>,
}

/// The instructions of the attached program: the packet counted in
/// `stats[Stat::Packets]`, then [`super::generate`]'s parser and rules,
/// each entry counted in `counters` (the main program's per-rule array)
/// under its rule id and the policy under 0, as the walker counts them;
/// a frame that is not IP also in `stats[Stat::NotIp]`.
pub fn generate_attached(list: &DecisionList, maps: &Maps<'_>) -> Result<Vec<[u8; 8]>> {
    if let Some(why) = ineligible(list) {
        return Err(Error::Codegen(format!("not eligible: {why}")));
    }
    let mut a = Asm::default();
    count_packet(&mut a, maps);
    let exits = parse::Exits {
        classify: a.label(),
        drop: a.label(),
        pass: a.label(),
    };
    parse::emit_parser(&mut a, rules::used_slots(list, true), &exits);
    let hook_stats = maps.hook_stats.as_raw_fd();
    a.bind(exits.drop);
    exit_counted(&mut a, hook_stats, parse::XDP_DROP);
    a.bind(exits.pass);
    count_stat(
        &mut a,
        maps.stats.as_raw_fd(),
        crate::abi::Stat::NotIp as u32,
    );
    exit_counted(&mut a, hook_stats, parse::XDP_PASS);
    let (pass, drop) = (a.label(), a.label());
    let key = |i: usize| list.entries.get(i).map_or(0, |e| e.rule_id);
    let counters = Some(maps.counters.as_raw_fd());
    rules::emit_rules_keyed(
        &mut a,
        list,
        exits.classify,
        counters,
        &key,
        Some((pass, drop)),
    );
    a.bind(pass);
    exit_counted(&mut a, hook_stats, parse::XDP_PASS);
    a.bind(drop);
    exit_counted(&mut a, hook_stats, parse::XDP_DROP);
    a.finish()
        .map_err(|e| Error::Codegen(format!("assembling: {e:?}")))
}

/// Generates and loads `list`'s attached program ([`generate_attached`]),
/// named [`GENERATED_PROG_NAME`], and its instruction count; the
/// verifier's last lines in the error when it refuses.
pub fn load_attached(list: &DecisionList, maps: &Maps<'_>) -> Result<(OwnedFd, usize)> {
    let prog = generate_attached(list, maps)?;
    let license = CString::new("GPL").expect("no NUL");
    let fd = super::load_raw(&prog, &license, None).map_err(|first| {
        let mut log = vec![0u8; 1 << 20];
        let _ = super::load_raw(&prog, &license, Some(&mut log));
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        let text = String::from_utf8_lossy(&log[..end]);
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(20)..].join("\n");
        Error::Codegen(format!(
            "the verifier refused the generated program ({} instructions): {first}\n{tail}",
            prog.len()
        ))
    })?;
    Ok((fd, prog.len()))
}
