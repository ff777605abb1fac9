//! `-m tcp [!] --tcp-option N` (libxt_tcp, xt_tcpudp.c): option kind N
//! (1-255, read as `strtoul` with base 0 reads it: `0x40` and `0100` are
//! 64) among the segment's options, as `Field::TcpOption(N)`
//! (`parapet_model::tcp_option` for the kernel's walk). One per `-m tcp`
//! (libxt_tcp: "Only one `--tcp-option' allowed"); a second `-m tcp` may
//! carry another.

use super::option_arg::OptionArg;
use super::rule::RuleParser;
use parapet_model::{Field, IntervalSet};

/// libxtables' `xtables_strtoui` with base 0 (`strtoul`'s reading):
/// leading white space and one `+` skipped, then `0x` hexadecimal, a
/// leading `0` octal, else decimal; `None` unless all of `s` is read and
/// the value is in `lo..=hi`.
pub(crate) fn strtoui_base0(s: &str, lo: u32, hi: u32) -> Option<u32> {
    let s = s.trim_start();
    let s = s.strip_prefix('+').unwrap_or(s);
    let (digits, radix) = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        (h, 16)
    } else if s.len() > 1 && s.starts_with('0') {
        (&s[1..], 8)
    } else {
        (s, 10)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u32::from_str_radix(digits, radix)
        .ok()
        .filter(|v| (lo..=hi).contains(v))
}

impl RuleParser<'_> {
    /// `--tcp-option N` of the last `-m tcp` (or of `-p tcp`'s implicit one).
    pub(super) fn tcp_option(&mut self, arg: OptionArg<'_>) {
        let (_, col, negated, v, vcol) = arg.parts();
        if self.tcp_option_given {
            return self.err(
                col,
                "only one --tcp-option per -m tcp, as iptables says (\"Only one `--tcp-option' allowed\"; write another -m tcp for a second option)",
            );
        }
        self.tcp_option_given = true;
        let Some(kind) = strtoui_base0(v, 1, 255) else {
            return self.err(
                vcol,
                format!("expected a TCP option kind 1-255 after --tcp-option, found '{v}' (iptables: Bad TCP option)"),
            );
        };
        let want = if negated.is_some() { 0 } else { 1 };
        self.matches
            .constrain(Field::TcpOption(kind as u8), IntervalSet::point(want));
    }
}

#[cfg(test)]
mod tests {
    use super::strtoui_base0;

    #[test]
    fn numbers_read_as_strtoul_with_base_0() {
        assert_eq!(strtoui_base0("64", 1, 255), Some(64));
        assert_eq!(strtoui_base0("0x40", 1, 255), Some(64));
        assert_eq!(strtoui_base0("010", 1, 255), Some(8));
        assert_eq!(strtoui_base0("+5", 1, 255), Some(5));
        for bad in ["0", "00", "256", "-1", "64x", "", "0x", "08", "+-5"] {
            assert_eq!(strtoui_base0(bad, 1, 255), None, "{bad}");
        }
    }
}
