//! Errors of set operations (not of parsing), shared by the set, its
//! description and the store.

use crate::limits::MAX_EXPAND;
use std::fmt;

/// Errors of set operations (not of parsing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SetError {
    /// No set of that name.
    NoSuchSet(String),
    /// A set of that name already exists.
    Exists(String),
    /// `maxelem` reached: the element was not added.
    Full { set: String, maxelem: usize },
    /// A timeout on an element of a set created without timeout support.
    TimeoutNotSupported { set: String },
    /// A key outside a bitmap set's range.
    OutOfRange { set: String, element: String },
    /// A range in a non-interval set that expands into too many elements.
    RangeTooLarge { set: String, element: String },
    /// A concatenation element whose ranges decompose into too many boxes.
    TooComplex {
        set: String,
        element: String,
        boxes: usize,
    },
    /// Element/key shape does not fit the set's type.
    TypeMismatch { set: String, message: String },
    /// The description cannot be realised.
    InvalidDesc(String),
}

impl fmt::Display for SetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetError::NoSuchSet(s) => write!(f, "set `{s}` does not exist"),
            SetError::Exists(s) => write!(f, "set `{s}` already exists"),
            SetError::Full { set, maxelem } => write!(
                f,
                "set `{set}` is full (maxelem {maxelem}): element not added"
            ),
            SetError::TimeoutNotSupported { set } => {
                write!(f, "set `{set}` was created without timeout support")
            }
            SetError::OutOfRange { set, element } => {
                write!(f, "element {element} is outside the range of set `{set}`")
            }
            SetError::RangeTooLarge { set, element } => {
                write!(f, "range {element} expands to more than {MAX_EXPAND} elements in set `{set}` (not an interval set)")
            }
            SetError::TooComplex {
                set,
                element,
                boxes,
            } => {
                write!(f, "element {element} of set `{set}` decomposes into {boxes} prefix boxes (limit {})", crate::backend::tss::MAX_BOXES)
            }
            SetError::TypeMismatch { set, message } => write!(f, "set `{set}`: {message}"),
            SetError::InvalidDesc(m) => write!(f, "invalid set description: {m}"),
        }
    }
}

impl std::error::Error for SetError {}
