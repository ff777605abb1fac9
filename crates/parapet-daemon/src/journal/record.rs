//! The journal's record payloads: [`Record`], its encoding (one writer per
//! change kind in [`enc`], [`encode`] for a [`Change`]) and [`decode`].
//! Framing, files and snapshots are the parent's (`journal.rs`).

use crate::change::Change;
use parapet_dataplane::{AttachPoint, Mode};
use parapet_sets::{Element, KeyPart};

/// One journaled change (decoded form).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// `set.create`: the creation request as JSON ([`crate::change::SetSpec`]).
    SetCreate { name: String, spec: String },
    /// `set.destroy`.
    SetDestroy { name: String },
    /// `set.add`: elements (ranges only); each element's `expires` holds
    /// its *absolute* expiry in Unix ms (`None` = permanent), so replay can
    /// turn it into a remaining lifetime in place. `widths` are the key's
    /// dimension widths in bytes.
    SetAdd {
        name: String,
        widths: Vec<u8>,
        elems: Vec<Element>,
    },
    /// `set.del`.
    SetDel {
        name: String,
        widths: Vec<u8>,
        elems: Vec<Element>,
    },
    /// `set.flush`.
    SetFlush { name: String },
    /// `apply`: the active ruleset's source.
    Apply {
        name: String,
        format: String,
        text: String,
    },
    /// `attach`: the BPF program on an interface (`hook` 0 = XDP, 1 = tc;
    /// `mode` 0 = native, 1 = skb, as requested).
    Attach { iface: String, hook: u8, mode: u8 },
    /// `detach`.
    Detach { iface: String, hook: u8 },
}

const T_CREATE: u8 = 1;
const T_DESTROY: u8 = 2;
const T_ADD: u8 = 3;
const T_DEL: u8 = 4;
const T_FLUSH: u8 = 5;
const T_APPLY: u8 = 6;
const T_ATTACH: u8 = 7;
const T_DETACH: u8 = 8;

fn put_str(b: &mut Vec<u8>, s: &str) {
    b.extend_from_slice(&(s.len() as u32).to_le_bytes());
    b.extend_from_slice(s.as_bytes());
}

/// Width in bytes of a key dimension in records.
pub fn dim_bytes(d: KeyPart) -> u8 {
    (d.width() / 8) as u8
}

fn put_head(b: &mut Vec<u8>, tag: u8, name: &str, dims: &[KeyPart], n: usize) {
    b.push(tag);
    put_str(b, name);
    b.push(dims.len() as u8);
    b.extend(dims.iter().map(|d| dim_bytes(*d)));
    b.extend_from_slice(&(n as u32).to_le_bytes());
}

fn put_ranges(b: &mut Vec<u8>, dims: &[KeyPart], el: &Element) {
    let r = el.ranges();
    let mask = r.iter().enumerate().fold(
        0u8,
        |m, (i, (lo, hi))| if lo == hi { m | 1 << i } else { m },
    );
    b.push(mask);
    for (d, (lo, hi)) in dims.iter().zip(r) {
        let w = dim_bytes(*d) as usize;
        b.extend_from_slice(&lo.to_le_bytes()[..w]);
        if lo != hi {
            b.extend_from_slice(&hi.to_le_bytes()[..w]);
        }
    }
}

/// Payload encoders, writing straight from borrowed data (no temporary
/// [`Record`] on the hot path).
pub mod enc {
    use super::*;
    /// `set.create`.
    pub fn create(b: &mut Vec<u8>, name: &str, spec: &str) {
        b.push(T_CREATE);
        put_str(b, name);
        put_str(b, spec);
    }
    /// `set.destroy`.
    pub fn destroy(b: &mut Vec<u8>, name: &str) {
        b.push(T_DESTROY);
        put_str(b, name);
    }
    /// `set.add` of parsed elements of a set with key `dims`, each with an
    /// absolute expiry (ms; 0 = permanent).
    pub fn add<'a>(
        b: &mut Vec<u8>,
        name: &str,
        dims: &[KeyPart],
        elems: impl ExactSizeIterator<Item = (&'a Element, u64)>,
    ) {
        put_head(b, T_ADD, name, dims, elems.len());
        for (e, exp) in elems {
            put_ranges(b, dims, e);
            b.extend_from_slice(&exp.to_le_bytes());
        }
    }
    /// `set.del`.
    pub fn del<'a>(
        b: &mut Vec<u8>,
        name: &str,
        dims: &[KeyPart],
        elems: impl ExactSizeIterator<Item = &'a Element>,
    ) {
        put_head(b, T_DEL, name, dims, elems.len());
        for e in elems {
            put_ranges(b, dims, e);
        }
    }
    /// `set.flush`.
    pub fn flush(b: &mut Vec<u8>, name: &str) {
        b.push(T_FLUSH);
        put_str(b, name);
    }
    /// `apply`.
    pub fn apply(b: &mut Vec<u8>, name: &str, format: &str, text: &str) {
        b.push(T_APPLY);
        put_str(b, name);
        put_str(b, format);
        put_str(b, text);
    }
    /// `attach`.
    pub fn attach(b: &mut Vec<u8>, iface: &str, hook: u8, mode: u8) {
        b.push(T_ATTACH);
        put_str(b, iface);
        b.push(hook);
        b.push(mode);
    }
    /// `detach`.
    pub fn detach(b: &mut Vec<u8>, iface: &str, hook: u8) {
        b.push(T_DETACH);
        put_str(b, iface);
        b.push(hook);
    }
}

/// The hook's journal byte.
pub fn hook_byte(h: AttachPoint) -> u8 {
    match h {
        AttachPoint::Xdp => 0,
        AttachPoint::Tc => 1,
        AttachPoint::Netfilter => 2,
    }
}

/// The mode's journal byte.
pub fn mode_byte(m: Mode) -> u8 {
    match m {
        Mode::Native => 0,
        Mode::Skb => 1,
    }
}

/// The journal bytes back to a hook and mode.
pub fn from_bytes(hook: u8, mode: u8) -> (AttachPoint, Mode) {
    (
        match hook {
            1 => AttachPoint::Tc,
            2 => AttachPoint::Netfilter,
            _ => AttachPoint::Xdp,
        },
        if mode == 1 { Mode::Skb } else { Mode::Native },
    )
}

/// Writes the record of a change (elements with absolute expiries, see
/// [`Change::SetAdd`]).
pub fn encode(b: &mut Vec<u8>, change: &Change, dims: &[KeyPart]) {
    match change {
        Change::SetCreate { name, spec } => enc::create(
            b,
            name,
            &serde_json::to_string(spec).expect("spec serializes"),
        ),
        Change::SetDestroy { name } => enc::destroy(b, name),
        Change::SetAdd { name, elems } => enc::add(
            b,
            name,
            dims,
            elems.iter().map(|e| (e, e.expires.unwrap_or(0))),
        ),
        Change::SetDel { name, elems } => enc::del(b, name, dims, elems.iter()),
        Change::SetFlush { name } => enc::flush(b, name),
        Change::Apply {
            name,
            text,
            compiled,
        } => enc::apply(b, name, &compiled.format, text),
        Change::Attach { iface, hook, mode } => {
            enc::attach(b, iface, hook_byte(*hook), mode_byte(*mode))
        }
        Change::Detach { iface, hook } => enc::detach(b, iface, hook_byte(*hook)),
    }
}

struct Cur<'a>(&'a [u8]);

impl<'a> Cur<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
    }
    fn string(&mut self) -> Option<String> {
        let n = self.u32()? as usize;
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }
    fn widths(&mut self) -> Option<Vec<u8>> {
        let n = self.take(1)?[0] as usize;
        let w = self.take(n)?.to_vec();
        if n == 0 || n > parapet_sets::MAX_DIMS || w.iter().any(|&x| x == 0 || x > 16) {
            return None;
        }
        Some(w)
    }
    fn uint(&mut self, w: usize) -> Option<u128> {
        let b = self.take(w)?;
        let mut x = [0u8; 16];
        x[..w].copy_from_slice(b);
        Some(u128::from_le_bytes(x))
    }
    fn element(&mut self, widths: &[u8]) -> Option<Element> {
        let mask = self.take(1)?[0];
        let mut r = [(0u128, 0u128); parapet_sets::MAX_DIMS];
        for (i, &w) in widths.iter().enumerate() {
            let lo = self.uint(w as usize)?;
            let hi = if mask & (1 << i) != 0 {
                lo
            } else {
                self.uint(w as usize)?
            };
            r[i] = (lo, hi);
        }
        Some(Element::new(&r[..widths.len()]))
    }
}

/// Decodes a payload; `None` when it is not a well-formed record.
pub fn decode(payload: &[u8]) -> Option<Record> {
    let mut c = Cur(payload);
    let tag = c.take(1)?[0];
    let r = match tag {
        T_CREATE => Record::SetCreate {
            name: c.string()?,
            spec: c.string()?,
        },
        T_DESTROY => Record::SetDestroy { name: c.string()? },
        T_ADD => {
            let name = c.string()?;
            let widths = c.widths()?;
            let n = c.u32()? as usize;
            // Each element takes at least 10 bytes: do not trust `n` for the allocation.
            let mut elems = Vec::with_capacity(n.min(c.0.len() / 10));
            for _ in 0..n {
                let mut el = c.element(&widths)?;
                let exp = c.u64()?;
                el.expires = (exp != 0).then_some(exp);
                elems.push(el);
            }
            Record::SetAdd {
                name,
                widths,
                elems,
            }
        }
        T_DEL => {
            let name = c.string()?;
            let widths = c.widths()?;
            let n = c.u32()? as usize;
            let mut elems = Vec::with_capacity(n.min(c.0.len() / 2));
            for _ in 0..n {
                elems.push(c.element(&widths)?);
            }
            Record::SetDel {
                name,
                widths,
                elems,
            }
        }
        T_FLUSH => Record::SetFlush { name: c.string()? },
        T_APPLY => Record::Apply {
            name: c.string()?,
            format: c.string()?,
            text: c.string()?,
        },
        T_ATTACH => Record::Attach {
            iface: c.string()?,
            hook: c.take(1)?[0],
            mode: c.take(1)?[0],
        },
        T_DETACH => Record::Detach {
            iface: c.string()?,
            hook: c.take(1)?[0],
        },
        _ => return None,
    };
    if !c.0.is_empty() {
        return None;
    }
    Some(r)
}
