//! The CrowdSec source's HTTP: one bounded `GET` over HTTP/1.1 (plain, or
//! inside TLS: `crowdsec/tls.rs`) and the parsing of a decisions stream
//! (`/v1/decisions/stream`) and of Go duration strings.
//!
//! Hand-written rather than a client crate: the Local API is on loopback
//! in the common case, one request shape is needed, and owning the reader
//! keeps every byte counted against the size cap (status line, headers,
//! chunked framing and body) with no new dependencies.

use crate::crowdsec::tls::Tls;
use serde::Deserialize;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Where the Local API is: `http[s]://HOST:PORT[/PREFIX]`.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// `HOST:PORT` as given (for `Host:` and connecting).
    pub authority: String,
    /// The host alone (no port, no brackets): the name a TLS server's
    /// certificate must carry.
    pub host: String,
    /// Path prefix without a trailing `/`.
    pub prefix: String,
    /// `https`.
    pub tls: bool,
}

impl Endpoint {
    /// Parses `http[s]://HOST[:PORT][/PREFIX]` (port 8080, the LAPI's, by
    /// default).
    pub fn parse(url: &str) -> Result<Endpoint, String> {
        let (tls, rest) = match url.split_once("://") {
            Some(("http", r)) => (false, r),
            Some(("https", r)) => (true, r),
            Some((s, _)) => {
                return Err(format!(
                    "--crowdsec {url}: scheme `{s}` not supported (http or https)"
                ))
            }
            None => return Err(format!("--crowdsec {url}: expected http://HOST:PORT")),
        };
        let (auth, path) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
            None => (rest, ""),
        };
        if auth.is_empty() || auth.contains('@') {
            return Err(format!("--crowdsec {url}: bad host"));
        }
        let port = auth
            .rsplit_once(':')
            .filter(|(h, p)| p.parse::<u16>().is_ok() && (!h.starts_with('[') || h.ends_with(']')));
        let (host, authority) = match port {
            Some((h, _)) => (h, auth.to_string()),
            None => (auth, format!("{auth}:8080")),
        };
        Ok(Endpoint {
            authority,
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
            prefix: path.to_string(),
            tls,
        })
    }
}

/// A connection to the LAPI: a socket, or TLS over one.
trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// Limits of one request.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Connect, and each read and write.
    pub timeout: Duration,
    /// Most bytes of the response (headers and body).
    pub max_bytes: u64,
}

/// `GET prefix+path` with header `X-Api-Key` (none when `key` is empty: a
/// client certificate authenticates), inside TLS when `tls` is given
/// (the endpoint is `https`); the body of a 200 response
/// is handed to `decode` as a reader (`Content-Length`, chunked, or to
/// EOF), so a large response is decoded as it arrives and never held
/// whole in memory. Whatever `decode` leaves unread is an error (it must
/// consume the body to its end); a cut or oversize response is one too.
pub fn get<T>(
    ep: &Endpoint,
    path: &str,
    key: &str,
    tls: Option<&Tls>,
    lim: Limits,
    decode: impl FnOnce(&mut dyn Read) -> Result<T, String>,
) -> Result<T, String> {
    let addr = ep
        .authority
        .to_socket_addrs()
        .map_err(|e| format!("{}: {e}", ep.authority))?
        .next()
        .ok_or_else(|| format!("{}: no address", ep.authority))?;
    let s = TcpStream::connect_timeout(&addr, lim.timeout).map_err(|e| format!("{addr}: {e}"))?;
    s.set_read_timeout(Some(lim.timeout))
        .map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(lim.timeout))
        .map_err(|e| e.to_string())?;
    let key_header = if key.is_empty() {
        String::new()
    } else {
        format!("X-Api-Key: {key}\r\n")
    };
    let req = format!(
        "GET {}{path} HTTP/1.1\r\nHost: {}\r\nUser-Agent: parapetd/{}\r\n{key_header}Accept: application/json\r\nConnection: close\r\n\r\n",
        ep.prefix,
        ep.authority,
        env!("CARGO_PKG_VERSION")
    );
    let mut s: Box<dyn ReadWrite> = match tls {
        Some(t) => Box::new(t.connect(&ep.host, s)?),
        None => Box::new(s),
    };
    s.write_all(req.as_bytes())
        .map_err(|e| format!("{addr}: {e}"))?;
    let mut r = BufReader::new(s.take(lim.max_bytes));
    let status = line(&mut r)?;
    let code: u16 = status
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .filter(|_| status.starts_with("HTTP/1."))
        .ok_or_else(|| format!("bad status line `{}`", clip(&status)))?;
    let (mut length, mut chunked) = (None, false);
    loop {
        let h = line(&mut r)?;
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':').ok_or("bad header line")?;
        let v = v.trim();
        if k.eq_ignore_ascii_case("content-length") {
            length = Some(v.parse::<u64>().map_err(|_| "bad Content-Length")?);
        } else if k.eq_ignore_ascii_case("transfer-encoding") {
            chunked = v.eq_ignore_ascii_case("chunked");
        }
    }
    if length.is_some_and(|n| n > lim.max_bytes) {
        return Err(format!("response larger than {} bytes", lim.max_bytes));
    }
    let mut body = Body {
        r: &mut r,
        left: if chunked { Some(0) } else { length },
        chunked,
        done: false,
    };
    if code != 200 {
        let mut msg = Vec::new();
        let _ = (&mut body).take(4096).read_to_end(&mut msg);
        let msg = String::from_utf8_lossy(&msg);
        return Err(format!("HTTP {code}: {}", clip(msg.trim())));
    }
    let over =
        |r: &mut Body<'_, BufReader<std::io::Take<Box<dyn ReadWrite>>>>| r.r.get_ref().limit() == 0;
    match decode(&mut body) {
        Err(_) if over(&mut body) => Err(format!("response larger than {} bytes", lim.max_bytes)),
        Err(e) => Err(e),
        Ok(v) => {
            // The decoder must have read the body to its end (JSON ends
            // at the end of the body, not before).
            let more = body.read(&mut [0u8; 1]).map_err(|e| e.to_string())?;
            if over(&mut body) {
                Err(format!("response larger than {} bytes", lim.max_bytes))
            } else if more != 0 {
                Err("bytes after the decoded body".into())
            } else {
                Ok(v)
            }
        }
    }
}

/// A response body as a reader: `left` bytes of a `Content-Length` body
/// or of the current chunk (chunk framing read and checked here), or to
/// EOF when neither was given. A body cut short is an error, not an EOF.
struct Body<'a, R: BufRead> {
    r: &'a mut R,
    left: Option<u64>,
    chunked: bool,
    done: bool,
}

impl<R: BufRead> Read for Body<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let cut =
            |what: &str| std::io::Error::new(std::io::ErrorKind::UnexpectedEof, what.to_string());
        if self.done || buf.is_empty() {
            return Ok(0);
        }
        if self.chunked && self.left == Some(0) {
            let size = line(self.r).map_err(|e| cut(&e))?;
            let size = u64::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16)
                .map_err(|_| cut("bad chunk size"))?;
            if size == 0 {
                // The last chunk: then (no trailers) an empty line.
                if !line(self.r).map_err(|e| cut(&e))?.is_empty() {
                    return Err(cut("bad chunked trailer"));
                }
                self.done = true;
                return Ok(0);
            }
            self.left = Some(size);
        }
        let want = match self.left {
            Some(n) => buf.len().min(n.min(usize::MAX as u64) as usize),
            None => buf.len(),
        };
        let n = self.r.read(&mut buf[..want])?;
        match &mut self.left {
            None if n == 0 => self.done = true,
            None => {}
            Some(_) if n == 0 => return Err(cut("response cut short")),
            Some(l) => {
                *l -= n as u64;
                if *l == 0 {
                    if self.chunked {
                        if !line(self.r).map_err(|e| cut(&e))?.is_empty() {
                            return Err(cut("bad chunk end"));
                        }
                    } else {
                        self.done = true;
                    }
                }
            }
        }
        Ok(n)
    }
}

/// One CRLF-terminated line (at most 8 KiB).
fn line(r: &mut impl BufRead) -> Result<String, String> {
    let mut b = Vec::new();
    r.take(8192)
        .read_until(b'\n', &mut b)
        .map_err(|e| e.to_string())?;
    if b.last() != Some(&b'\n') {
        return Err("response cut short (or a line over 8 KiB)".into());
    }
    b.pop();
    if b.last() == Some(&b'\r') {
        b.pop();
    }
    String::from_utf8(b).map_err(|_| "non-UTF-8 header".into())
}

fn clip(s: &str) -> String {
    s.chars().take(120).collect()
}

/// One decision as the stream sends it, kept small (a full list holds
/// one per decision): the fields parapetd ignores are skipped, and the
/// type and scope are read into flags rather than kept as text.
#[derive(Deserialize, Debug, Clone)]
pub struct Decision {
    /// The LAPI's decision id.
    pub id: i64,
    /// Go duration text, remaining lifetime (negative when expired).
    pub duration: String,
    /// `Ip`, `Range`, or others (ignored).
    #[serde(deserialize_with = "scope")]
    pub scope: Scope,
    /// Whether the type is `ban` (`captcha`, … are not enforced).
    #[serde(rename = "type", deserialize_with = "is_ban")]
    pub ban: bool,
    /// The address or prefix.
    pub value: String,
}

/// A decision's scope, as far as parapet cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// One address.
    Ip,
    /// A prefix `ADDR/LEN`.
    Range,
    /// `Country`, `AS`, … (not enforced).
    Other,
}

fn scope<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Scope, D::Error> {
    let s = std::borrow::Cow::<str>::deserialize(d)?;
    Ok(if s.eq_ignore_ascii_case("ip") {
        Scope::Ip
    } else if s.eq_ignore_ascii_case("range") {
        Scope::Range
    } else {
        Scope::Other
    })
}

fn is_ban<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(std::borrow::Cow::<str>::deserialize(d)?.eq_ignore_ascii_case("ban"))
}

/// A `/v1/decisions/stream` response (`null` lists are empty).
#[derive(Deserialize, Debug, Default)]
pub struct StreamBody {
    /// Decisions to enforce.
    #[serde(default, deserialize_with = "null_is_empty")]
    pub new: Vec<Decision>,
    /// Decisions deleted or expired: only their ids are kept (a mass
    /// deletion lists every decision in full).
    #[serde(default, deserialize_with = "null_is_empty")]
    pub deleted: Vec<Deleted>,
}

/// A deleted decision: its id (the rest is skipped while decoding).
#[derive(Deserialize, Debug, Clone, Copy)]
pub struct Deleted {
    /// The LAPI's decision id.
    pub id: i64,
}

fn null_is_empty<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Vec<T>, D::Error> {
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

/// Parses a Go `time.Duration` string (`3h59m58.5s`, `-9.7ms`, `0s`) to
/// milliseconds, rounded toward zero.
pub fn go_duration_ms(s: &str) -> Result<i64, String> {
    let bad = || format!("bad duration `{}`", clip(s));
    let (neg, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(bad());
    }
    let mut ns: f64 = 0.0;
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let num: f64 = rest[..n].parse().map_err(|_| bad())?;
        rest = &rest[n..];
        let u = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..u] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return Err(bad()),
        };
        rest = &rest[u..];
        ns += num * scale;
    }
    // Go's Duration is an int64 of ns: about 292 years at most.
    if !ns.is_finite() || ns > 9.3e18 {
        return Err(bad());
    }
    let ms = (ns / 1e6) as i64;
    Ok(if neg { -ms } else { ms })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(go_duration_ms("3h59m58.5s"), Ok(14_398_500));
        assert_eq!(go_duration_ms("29m59.153204239s"), Ok(1_799_153));
        assert_eq!(go_duration_ms("-9.740843ms"), Ok(-9));
        assert_eq!(go_duration_ms("0s"), Ok(0));
        assert_eq!(go_duration_ms("1µs"), Ok(0));
        for b in ["", "h", "3x", "1.2.3s", "-", "99999999999h", "1h 2m"] {
            assert!(go_duration_ms(b).is_err(), "{b}");
        }
    }

    #[test]
    fn endpoints() {
        let e = Endpoint::parse("http://127.0.0.1:18080/").unwrap();
        assert_eq!(
            (e.authority.as_str(), e.prefix.as_str()),
            ("127.0.0.1:18080", "")
        );
        let e = Endpoint::parse("http://localhost/lapi").unwrap();
        assert_eq!(
            (e.authority.as_str(), e.prefix.as_str()),
            ("localhost:8080", "/lapi")
        );
        let e = Endpoint::parse("https://[::1]:8443/").unwrap();
        assert_eq!(
            (e.host.as_str(), e.authority.as_str(), e.tls),
            ("::1", "[::1]:8443", true)
        );
        let e = Endpoint::parse("https://lapi.example").unwrap();
        assert_eq!(
            (e.host.as_str(), e.authority.as_str()),
            ("lapi.example", "lapi.example:8080")
        );
        assert!(Endpoint::parse("ftp://x").is_err());
        assert!(Endpoint::parse("x:1").is_err());
    }
}
