//! The one shape every match module's option reader takes.

/// One match option as the rule reader hands it to a module's reader: its
/// name and column, the column of the `!` before it (if any), and its one
/// value with the value's column. The modules' readers all take this, so
/// the option loop is written once (`option_in_order`).
#[derive(Clone, Copy)]
pub(super) struct OptionArg<'a> {
    pub(super) name: &'a str,
    pub(super) col: u32,
    pub(super) negated: Option<u32>,
    pub(super) value: &'a str,
    pub(super) vcol: u32,
}

impl<'a> OptionArg<'a> {
    /// (name, column, `!` column, value, value column), for readers that
    /// name them as locals.
    pub(super) fn parts(self) -> (&'a str, u32, Option<u32>, &'a str, u32) {
        (self.name, self.col, self.negated, self.value, self.vcol)
    }
}
