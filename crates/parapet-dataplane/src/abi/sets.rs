//! The set maps' structs: set references (how the image key's set bits are
//! computed), tuple-set shapes, and the LPM, exact-address and tuple keys
//! and values.

/// Most set references an image may use (one `u64` of key bits).
pub const MAX_SET_REFS: u32 = 64;
/// Set ids are `0..MAX_SETS`.
pub const MAX_SETS: u32 = 1024;
/// Dimensions of a concatenated set key.
pub const SET_MAX_DIMS: usize = 4;
/// Bytes of a concatenated set key.
pub const SET_KEY_BYTES: usize = 36;
/// Prefix-length combinations ("shapes") of a tuple set.
pub const SET_MAX_SHAPES: usize = 32;
/// `enum parapet_set_kind`: one dimension, in the LPM trie.
pub const SET_LPM: u8 = 1;
/// `enum parapet_set_kind`: anything else, in the tuple hash.
pub const SET_TUPLE: u8 = 2;

/// `struct parapet_set_ref`: how reference n builds its key.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawSetRef {
    /// Set id.
    pub set_id: u16,
    /// [`SET_LPM`], [`SET_TUPLE`] or 0 (never a member).
    pub kind: u8,
    /// 0 (any), 4 or 6.
    pub family: u8,
    /// Dimensions in use.
    pub n_dims: u8,
    /// `enum parapet_set_part` per dimension.
    pub part: [u8; SET_MAX_DIMS],
    /// Bytes per dimension.
    pub width: [u8; SET_MAX_DIMS],
    /// Zero.
    pub _pad: [u8; 3],
}

/// `struct parapet_set_desc`: the shapes (bit masks) of a tuple set.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawSetDesc {
    /// Shapes in use.
    pub n_shapes: u32,
    /// Zero.
    pub _pad: u32,
    /// Per shape, the key bits it keeps (words of big-endian key bytes).
    pub mask: [[u32; SET_KEY_BYTES / 4]; SET_MAX_SHAPES],
}

impl Default for RawSetDesc {
    fn default() -> Self {
        RawSetDesc {
            n_shapes: 0,
            _pad: 0,
            mask: [[0; SET_KEY_BYTES / 4]; SET_MAX_SHAPES],
        }
    }
}

/// `struct parapet_set_lpm_key`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SetLpmKey {
    /// 16 + the address prefix length.
    pub prefixlen: u32,
    /// Set id, big-endian.
    pub set_id: [u8; 2],
    /// Address, big-endian; IPv4 in the first 4 bytes.
    pub addr: [u8; 16],
    /// Zero.
    pub _pad: [u8; 2],
}

/// `struct parapet_set_tuple_key`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SetTupleKey {
    /// Set id.
    pub set_id: u16,
    /// Shape index.
    pub shape: u8,
    /// Zero.
    pub _pad: u8,
    /// Masked key bytes, dimensions back to back, big-endian.
    pub data: [u8; SET_KEY_BYTES],
}

impl Default for SetTupleKey {
    fn default() -> Self {
        SetTupleKey {
            set_id: 0,
            shape: 0,
            _pad: 0,
            data: [0; SET_KEY_BYTES],
        }
    }
}

/// `struct parapet_set_exact4_key`: one IPv4 address of an address set
/// (the value is its expiry, a `u64`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SetExact4Key {
    /// Set id.
    pub set_id: u16,
    /// Zero.
    pub _pad: u16,
    /// Address, big-endian.
    pub addr: [u8; 4],
}

/// `struct parapet_set_exact6_key`: one IPv6 address of an address set.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SetExact6Key {
    /// Set id.
    pub set_id: u16,
    /// Zero.
    pub _pad: u16,
    /// Address, big-endian.
    pub addr: [u8; 16],
}

/// `struct parapet_set_val`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SetVal {
    /// CLOCK_MONOTONIC ns; 0 = permanent.
    pub expires_ns: u64,
    /// LPM: the entry's prefixlen.
    pub prefixlen: u32,
    /// Zero.
    pub _pad: u32,
}
