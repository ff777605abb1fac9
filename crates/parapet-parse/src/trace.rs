//! Trace files: one packet per line, `src dst sport dport proto …`.
//!
//! IPv4 addresses are unsigned 32-bit decimals (ClassBench traces); IPv6
//! traces write addresses as text. Columns after the fifth (ClassBench's
//! flags and generating filter) are ignored. Blank lines and `#` comments
//! are skipped.

use crate::common::parse_ip;
use crate::error::ParseError;
use parapet_model::{Family, Packet};
use std::io::BufRead;

/// Streams the packets of a trace, with line-numbered errors.
///
/// ```
/// use parapet_parse::trace::TraceReader;
/// let text = "167772161\t167772162\t1234\t22\t6\t0\t5\n";
/// let packets: Vec<_> = TraceReader::new(text.as_bytes(), "t").collect::<Result<_, _>>().unwrap();
/// assert_eq!(packets[0].dport, 22);
/// assert_eq!(packets[0].src, 0x0a00_0001);
/// ```
pub struct TraceReader<R> {
    input: R,
    file: String,
    line: u32,
    buf: String,
}

impl<R: BufRead> TraceReader<R> {
    /// Reads from `input`; `file` names it in errors.
    pub fn new(input: R, file: &str) -> Self {
        TraceReader {
            input,
            file: file.to_string(),
            line: 0,
            buf: String::new(),
        }
    }

    /// The line number of the last packet returned.
    pub fn line(&self) -> u32 {
        self.line
    }
}

impl<R: BufRead> Iterator for TraceReader<R> {
    type Item = Result<Packet, ParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            self.buf.clear();
            self.line += 1;
            match self.input.read_line(&mut self.buf) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) => {
                    return Some(Err(ParseError::new(&self.file, self.line, 1, format!("read error: {e}"))))
                }
            }
            let t = self.buf.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            return Some(
                parse_line(&self.buf).map_err(|(col, m)| ParseError::new(&self.file, self.line, col, m)),
            );
        }
    }
}

/// Parses one trace line.
///
/// ```
/// let p = parapet_parse::trace::parse_line("2001:db8::1 2001:db8::2 1 443 6").unwrap();
/// assert_eq!(p.family, parapet_model::Family::V6);
/// ```
pub fn parse_line(line: &str) -> Result<Packet, (u32, String)> {
    let mut cols = Vec::new();
    let mut start = None;
    for (i, c) in line.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(s)) => {
                cols.push((s as u32 + 1, &line[s..i]));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        cols.push((s as u32 + 1, &line[s..]));
    }
    let end = line.trim_end().chars().count() as u32 + 1;
    if cols.len() < 5 {
        return Err((
            cols.get(cols.len()).map_or(end, |c| c.0),
            format!(
                "expected 5 fields 'src dst sport dport proto', found {}",
                cols.len()
            ),
        ));
    }
    let addr = |i: usize| -> Result<(Family, u128), (u32, String)> {
        let (col, s) = cols[i];
        if let Ok(n) = s.parse::<u32>() {
            return Ok((Family::V4, n as u128));
        }
        parse_ip(s, None).ok_or((
            col,
            format!("expected an address (unsigned 32-bit decimal or IPv6 text), found '{s}'"),
        ))
    };
    let (f1, src) = addr(0)?;
    let (f2, dst) = addr(1)?;
    if f1 != f2 {
        return Err((cols[1].0, "source and destination must be of the same family".into()));
    }
    let num = |i: usize, max: u32, what: &str| -> Result<u32, (u32, String)> {
        let (col, s) = cols[i];
        s.parse::<u32>()
            .ok()
            .filter(|n| *n <= max)
            .ok_or((col, format!("expected {what} 0-{max}, found '{s}'")))
    };
    let sport = num(2, 65535, "a source port")? as u16;
    let dport = num(3, 65535, "a destination port")? as u16;
    let proto = num(4, 255, "a protocol number")? as u8;
    Ok(Packet::new(f1, src, dst, proto, sport, dport))
}

/// Reads a whole trace file (`-` is stdin).
pub fn read(path: &str) -> Result<Vec<Packet>, ParseError> {
    let reader: Box<dyn BufRead> = if path == "-" {
        Box::new(std::io::BufReader::new(std::io::stdin()))
    } else {
        let f = std::fs::File::open(path)
            .map_err(|e| ParseError::new(path, 0, 0, format!("cannot open: {e}")))?;
        Box::new(std::io::BufReader::new(f))
    };
    TraceReader::new(reader, path).collect()
}
