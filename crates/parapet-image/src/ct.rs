//! Conntrack state codes: the image key's `ctstate` word
//! (`PARAPET_CT_*` in `bpf/image.h`), the values of
//! [`parapet_model::CtState`].

use parapet_model::CtState;

/// INVALID (conntrack lookup on: refused by conntrack's checks).
pub const INVALID: u32 = CtState::Invalid as u32;
/// NEW.
pub const NEW: u32 = CtState::New as u32;
/// ESTABLISHED.
pub const ESTABLISHED: u32 = CtState::Established as u32;
/// RELATED.
pub const RELATED: u32 = CtState::Related as u32;
/// UNTRACKED: also the key's ctstate at XDP / tc ingress, where no
/// conntrack has run.
pub const UNTRACKED: u32 = CtState::Untracked as u32;
