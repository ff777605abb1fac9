//! Kernel functions (kfuncs) for aya 0.14, which cannot link them.
//!
//! clang compiles a call to an `extern` function as `call -1` (src_reg 1,
//! `BPF_PSEUDO_CALL`) with an `R_BPF_64_32` relocation against the
//! undefined symbol, and emits the function in BTF as a `FUNC` with
//! `BTF_FUNC_EXTERN` linkage. aya-obj 0.3 treats every src_reg-1 call as
//! a call into the object and fails with `UnknownFunction` (its
//! `relocation.rs`, `FunctionLinker::relocate`), and the kernel refuses
//! extern linkage in program BTF ("Invalid func linkage"). libbpf resolves
//! both; here [`resolve`] does it on a copy of the ELF before aya sees it:
//!
//! - each call to an undefined symbol becomes a kfunc call: src_reg 2
//!   (`BPF_PSEUDO_KFUNC_CALL`), imm = the function's BTF id in
//!   `/sys/kernel/btf/vmlinux`, off 0 (vmlinux, not a module);
//! - when the running kernel lacks the function, the call becomes
//!   `r0 = 0` (the lookups then return NULL) and it is reported missing;
//! - each extern `FUNC` in `.BTF` gets static linkage (the kernel checks
//!   the call against vmlinux BTF, not against this declaration).
//!
//! Declare the functions without `__ksym`: that attribute puts them in a
//! `.ksyms` DATASEC which aya cannot size.

use aya_obj::btf::{Btf, BtfKind};
use object::{Object, ObjectSection, ObjectSymbol, RelocationTarget, SectionKind};

const BTF_KIND_FUNC: u32 = 12;
const BTF_FUNC_EXTERN: u32 = 2;

/// The object with kfunc calls resolved, and the names the kernel lacks.
pub fn resolve(obj: &[u8], kernel: Option<&Btf>) -> Result<(Vec<u8>, Vec<String>), String> {
    let file = object::File::parse(obj).map_err(|e| format!("parsing the BPF object: {e}"))?;
    let mut out = obj.to_vec();
    let mut missing: Vec<String> = Vec::new();
    for sec in file.sections() {
        if sec.kind() != SectionKind::Text {
            continue;
        }
        let Some((base, size)) = sec.file_range() else {
            continue;
        };
        for (off, rel) in sec.relocations() {
            let RelocationTarget::Symbol(si) = rel.target() else {
                continue;
            };
            let sym = file
                .symbol_by_index(si)
                .map_err(|e| format!("relocation symbol: {e}"))?;
            if !sym.is_undefined() {
                continue;
            }
            let name = sym.name().map_err(|e| format!("symbol name: {e}"))?;
            if off + 8 > size {
                return Err(format!("relocation of {name} outside its section"));
            }
            let at = (base + off) as usize;
            // BPF_JMP | BPF_CALL, src_reg 1 (the byte holds dst | src << 4)
            if out[at] != 0x85 || out[at + 1] != 0x10 {
                return Err(format!("{name}: relocated instruction is not a call"));
            }
            match kernel.and_then(|b| b.id_by_type_name_kind(name, BtfKind::Func).ok()) {
                Some(id) => {
                    out[at + 1] = 0x20;
                    out[at + 2..at + 4].copy_from_slice(&0u16.to_le_bytes());
                    out[at + 4..at + 8].copy_from_slice(&id.to_le_bytes());
                }
                None => {
                    // BPF_ALU64 | BPF_MOV | BPF_K, dst r0, imm 0
                    out[at..at + 8].copy_from_slice(&[0xb7, 0, 0, 0, 0, 0, 0, 0]);
                    if !missing.iter().any(|m| m == name) {
                        missing.push(name.to_string());
                    }
                }
            }
        }
    }
    if let Some(btf) = file.section_by_name(".BTF") {
        if let Some((base, size)) = btf.file_range() {
            let (base, size) = (base as usize, size as usize);
            let end = base + size;
            static_externs(&mut out[base..end])?;
        }
    }
    Ok((out, missing))
}

/// Give every extern `FUNC` of a `.BTF` blob static linkage, in place.
fn static_externs(btf: &mut [u8]) -> Result<(), String> {
    let rd = |b: &[u8], at: usize| -> Result<u32, String> {
        b.get(at..at + 4)
            .map(|s| u32::from_le_bytes(s.try_into().expect("4 bytes")))
            .ok_or_else(|| "truncated .BTF".to_string())
    };
    if btf.len() < 24 || u16::from_le_bytes([btf[0], btf[1]]) != 0xeb9f {
        return Err(".BTF: bad header (or not little-endian)".into());
    }
    let hdr_len = rd(btf, 4)? as usize;
    let type_off = rd(btf, 8)? as usize;
    let type_len = rd(btf, 12)? as usize;
    let mut at = hdr_len + type_off;
    let end = at + type_len;
    while at < end {
        let info = rd(btf, at + 4)?;
        let kind = (info >> 24) & 0x1f;
        let vlen = (info & 0xffff) as usize;
        if kind == BTF_KIND_FUNC && vlen as u32 == BTF_FUNC_EXTERN {
            btf[at + 4..at + 8].copy_from_slice(&(info & !0xffff).to_le_bytes());
        }
        at += 12
            + match kind {
                1 | 14 | 17 => 4,             // INT, VAR, DECL_TAG
                3 => 12,                      // ARRAY
                4 | 5 | 15 | 19 => 12 * vlen, // STRUCT, UNION, DATASEC, ENUM64
                6 | 13 => 8 * vlen,           // ENUM, FUNC_PROTO
                2 | 7..=12 | 16 | 18 => 0,
                k => return Err(format!(".BTF: unknown kind {k}")),
            };
    }
    Ok(())
}
