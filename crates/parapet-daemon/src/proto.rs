//! The control protocol: one JSON object per line in each direction.
//!
//! A request is `{"v":1,"id":7,"cmd":"set.add","set":"blocklist",
//! "elems":["1.2.3.4"],"timeout":600}`; its reply is
//! `{"v":1,"id":7,"ok":true,...}` or
//! `{"v":1,"id":7,"ok":false,"error":{"code":"no_such_set","msg":"…"}}`.
//! Replies come in request order, so clients may pipeline. Every command
//! and field is documented in `docs/daemon.md`.
//!
//! Parsing is strict (unknown fields and unknown commands are errors) so a
//! typo cannot silently do something else, and cheap: element lists borrow
//! from the input line instead of allocating one string per element.

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::fmt;

/// Protocol version spoken by this daemon and client.
pub const PROTO_VERSION: u64 = 1;

/// Longest accepted request line, newline excluded: 16 MiB. A longer line
/// gets a `too_long` error and is skipped without being buffered whole.
pub const MAX_LINE: usize = 16 << 20;

/// Machine-readable error codes (`error.code` in replies).
pub mod code {
    /// The line is not a JSON object of the request shape.
    pub const PARSE: &str = "parse";
    /// The line exceeds [`super::MAX_LINE`].
    pub const TOO_LONG: &str = "too_long";
    /// Unsupported protocol version.
    pub const VERSION: &str = "version";
    /// Unknown `cmd`.
    pub const UNKNOWN_CMD: &str = "unknown_cmd";
    /// A required field is missing or a value is invalid.
    pub const INVALID: &str = "invalid";
    /// The named set does not exist.
    pub const NO_SUCH_SET: &str = "no_such_set";
    /// The set already exists (with a different description).
    pub const EXISTS: &str = "exists";
    /// The set is full (maxelem reached); nothing of the request was added.
    pub const FULL: &str = "full";
    /// The ruleset did not parse or compile; `error.errors` lists `FILE:LINE:COL: msg`.
    pub const APPLY: &str = "apply";
    /// The journal could not be written; the change is not acknowledged.
    pub const IO: &str = "io";
    /// Too many clients are connected.
    pub const BUSY: &str = "busy";
    /// The kernel dataplane refused: BPF unavailable, no such interface,
    /// no privilege, or a kernel map update failed.
    pub const DATAPLANE: &str = "dataplane";
}

/// A string that borrows from the request line when it has no escapes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Str<'a>(pub Cow<'a, str>);

impl std::ops::Deref for Str<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Str<'de>, E> {
                Ok(Str(Cow::Owned(s)))
            }
        }
        d.deserialize_str(V)
    }
}

fn default_version() -> u64 {
    PROTO_VERSION
}

/// One request. Which fields a command reads is listed per command in
/// `docs/daemon.md`; fields a command does not read are ignored by it, but
/// fields no command knows are rejected.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request<'a> {
    /// Protocol version; defaults to 1 so hand-typed requests stay short.
    #[serde(default = "default_version")]
    pub v: u64,
    /// Echoed in the reply.
    #[serde(default)]
    pub id: Option<u64>,
    /// The command (`ping`, `set.add`, …).
    #[serde(borrow)]
    pub cmd: Str<'a>,
    /// Set name.
    #[serde(default)]
    pub set: Option<String>,
    /// Elements (set.add, set.del) or addresses (ban, unban).
    #[serde(default, borrow)]
    pub elems: Vec<Str<'a>>,
    /// One element (set.test).
    #[serde(default)]
    pub elem: Option<String>,
    /// Timeout in seconds; 0 = permanent.
    #[serde(default)]
    pub timeout: Option<u64>,
    /// Set type (set.create): nft (`ipv4_addr . inet_service`) or ipset (`hash:net,port`).
    #[serde(default, rename = "type")]
    pub typ: Option<String>,
    /// Set flags (set.create): `interval`, `timeout`.
    #[serde(default)]
    pub flags: Vec<String>,
    /// Expected / maximum number of elements (set.create).
    #[serde(default)]
    pub size: Option<usize>,
    /// Backend policy (set.create): `performance` or `memory`.
    #[serde(default)]
    pub policy: Option<String>,
    /// Address family for ipset types (set.create): `inet` or `inet6`.
    #[serde(default)]
    pub family: Option<String>,
    /// set.create: succeed when an identical set exists.
    #[serde(default)]
    pub exist: bool,
    /// apply: the ruleset text.
    #[serde(default)]
    pub rules: Option<String>,
    /// apply: the file name used in error messages.
    #[serde(default)]
    pub name: Option<String>,
    /// apply: input format; list: output format.
    #[serde(default)]
    pub format: Option<String>,
    /// apply: validate only.
    #[serde(default)]
    pub check: bool,
    /// list: include counters.
    #[serde(default)]
    pub counters: bool,
    /// attach, detach: the network interface.
    #[serde(default)]
    pub iface: Option<String>,
    /// attach, detach: `xdp` (default) or `tc`.
    #[serde(default)]
    pub hook: Option<String>,
    /// attach: XDP mode, `native` (default; falls back to skb) or `skb`.
    #[serde(default)]
    pub mode: Option<String>,
}

/// An error reply.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorReply {
    /// One of [`code`].
    pub code: &'static str,
    /// Human-readable message.
    pub msg: String,
    /// Extra detail (e.g. the list of apply errors).
    pub detail: Option<(&'static str, Value)>,
}

impl ErrorReply {
    /// An error with a code and a message.
    pub fn new(code: &'static str, msg: impl Into<String>) -> ErrorReply {
        ErrorReply {
            code,
            msg: msg.into(),
            detail: None,
        }
    }
}

/// Result of one command: extra reply fields, or an error.
pub type Outcome = Result<Map<String, Value>, ErrorReply>;

/// Parses one request line. On failure returns the error reply and, when it
/// could be recovered, the request id so the client can match the reply.
pub fn parse_request(line: &[u8]) -> Result<Request<'_>, (Option<u64>, ErrorReply)> {
    match serde_json::from_slice::<Request>(line) {
        Ok(r) if r.v != PROTO_VERSION => Err((
            r.id,
            ErrorReply::new(
                code::VERSION,
                format!(
                    "protocol version {} not supported (this daemon speaks {PROTO_VERSION})",
                    r.v
                ),
            ),
        )),
        Ok(r) => Ok(r),
        Err(e) => {
            // Salvage the id from any JSON object so the reply can be matched.
            let id = serde_json::from_slice::<Value>(line)
                .ok()
                .and_then(|v| v.get("id").and_then(Value::as_u64));
            Err((
                id,
                ErrorReply::new(code::PARSE, format!("malformed request: {e}")),
            ))
        }
    }
}

/// Appends one reply line (with its newline) to `out`.
pub fn write_reply(out: &mut Vec<u8>, id: Option<u64>, outcome: &Outcome) {
    out.extend_from_slice(b"{\"v\":1,\"id\":");
    match id {
        Some(id) => {
            let mut b = itoa_buf(id);
            out.extend_from_slice(b.as_bytes_mut());
        }
        None => out.extend_from_slice(b"null"),
    }
    match outcome {
        Ok(fields) => {
            out.extend_from_slice(b",\"ok\":true");
            for (k, v) in fields {
                out.push(b',');
                // Keys and values are plain JSON; serializing into a Vec cannot fail.
                serde_json::to_writer(&mut *out, k).expect("serialize key");
                out.push(b':');
                serde_json::to_writer(&mut *out, v).expect("serialize value");
            }
        }
        Err(e) => {
            out.extend_from_slice(b",\"ok\":false,\"error\":{\"code\":");
            serde_json::to_writer(&mut *out, e.code).expect("serialize code");
            out.extend_from_slice(b",\"msg\":");
            serde_json::to_writer(&mut *out, &e.msg).expect("serialize msg");
            if let Some((k, v)) = &e.detail {
                out.push(b',');
                serde_json::to_writer(&mut *out, k).expect("serialize key");
                out.push(b':');
                serde_json::to_writer(&mut *out, v).expect("serialize detail");
            }
            out.push(b'}');
        }
    }
    out.extend_from_slice(b"}\n");
}

struct Digits {
    buf: [u8; 20],
    start: usize,
}

impl Digits {
    fn as_bytes_mut(&mut self) -> &[u8] {
        &self.buf[self.start..]
    }
}

fn itoa_buf(mut n: u64) -> Digits {
    let mut d = Digits {
        buf: [0; 20],
        start: 20,
    };
    loop {
        d.start -= 1;
        d.buf[d.start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    d
}

/// A parsed reply, as the client sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The request id it answers.
    pub id: Option<u64>,
    /// The whole reply object.
    pub body: Map<String, Value>,
}

impl Reply {
    /// Parses a reply line.
    pub fn parse(line: &[u8]) -> Result<Reply, String> {
        let v: Value = serde_json::from_slice(line)
            .map_err(|e| format!("malformed reply from daemon: {e}"))?;
        let Value::Object(body) = v else {
            return Err("malformed reply from daemon: not an object".into());
        };
        Ok(Reply {
            id: body.get("id").and_then(Value::as_u64),
            body,
        })
    }
    /// True for `"ok":true`.
    pub fn ok(&self) -> bool {
        self.body.get("ok").and_then(Value::as_bool) == Some(true)
    }
    /// The error as `code: msg`, when not ok.
    pub fn error(&self) -> Option<(String, String)> {
        if self.ok() {
            return None;
        }
        let e = self.body.get("error");
        let code = e
            .and_then(|e| e.get("code"))
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_string();
        let msg = e
            .and_then(|e| e.get("msg"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        Some((code, msg))
    }
    /// A field of the reply.
    pub fn get(&self, k: &str) -> Option<&Value> {
        self.body.get(k)
    }
}

impl std::ops::Index<&str> for Reply {
    type Output = Value;
    /// A field of the reply, `null` when absent.
    fn index(&self, k: &str) -> &Value {
        self.body.get(k).unwrap_or(&Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply_of(id: Option<u64>, o: &Outcome) -> Value {
        let mut out = Vec::new();
        write_reply(&mut out, id, o);
        assert_eq!(out.last(), Some(&b'\n'));
        assert_eq!(
            out.iter().filter(|&&b| b == b'\n').count(),
            1,
            "one line per reply"
        );
        serde_json::from_slice(&out).unwrap()
    }

    #[test]
    fn parses_example_request_and_borrows_elements() {
        let line = br#"{"v":1,"id":7,"cmd":"set.add","set":"blocklist","elems":["1.2.3.4","10.0.0.0/8"],"timeout":600}"#;
        let r = parse_request(line).unwrap();
        assert_eq!(r.id, Some(7));
        assert_eq!(&*r.cmd, "set.add");
        assert_eq!(r.set.as_deref(), Some("blocklist"));
        assert_eq!(r.timeout, Some(600));
        assert_eq!(r.elems.len(), 2);
        assert!(matches!(r.elems[0].0, Cow::Borrowed("1.2.3.4")));
        // An escaped string cannot borrow but still parses.
        let r = parse_request(br#"{"cmd":"ban","elems":["1.2.3.\u0034"]}"#).unwrap();
        assert_eq!(&*r.elems[0], "1.2.3.4");
        assert_eq!(r.v, 1);
    }

    #[test]
    fn rejects_bad_requests_with_id_when_possible() {
        let (id, e) = parse_request(br#"{"id":3,"cmd":"ping","bogus":1}"#).unwrap_err();
        assert_eq!((id, e.code), (Some(3), code::PARSE));
        let (id, e) = parse_request(br#"{"v":2,"id":4,"cmd":"ping"}"#).unwrap_err();
        assert_eq!((id, e.code), (Some(4), code::VERSION));
        let (id, e) = parse_request(b"not json").unwrap_err();
        assert_eq!((id, e.code), (None, code::PARSE));
        let (_, e) = parse_request(br#"{"id":5}"#).unwrap_err();
        assert_eq!(e.code, code::PARSE);
        let (_, e) = parse_request(br#"{"cmd":"ban","elems":[1,2]}"#).unwrap_err();
        assert_eq!(e.code, code::PARSE);
    }

    #[test]
    fn replies_are_one_json_line() {
        let mut m = Map::new();
        m.insert("added".into(), Value::from(2));
        m.insert("text".into(), Value::from("a\nb\"c"));
        let v = reply_of(Some(18446744073709551615), &Ok(m));
        assert_eq!(v["id"], Value::from(u64::MAX));
        assert_eq!(v["ok"], Value::Bool(true));
        assert_eq!(v["text"], Value::from("a\nb\"c"));
        let mut e = ErrorReply::new(code::APPLY, "2 errors");
        e.detail = Some(("errors", Value::from(vec!["f:1:2: x"])));
        let v = reply_of(None, &Err(e));
        assert_eq!(v["id"], Value::Null);
        assert_eq!(v["error"]["code"], Value::from("apply"));
        assert_eq!(v["error"]["errors"][0], Value::from("f:1:2: x"));
        let r = Reply::parse(serde_json::to_string(&v).unwrap().as_bytes()).unwrap();
        assert_eq!(r.error().unwrap().0, "apply");
    }

    proptest::proptest! {
        // The parser must never panic, whatever the bytes, and a reply for
        // any outcome must be exactly one valid JSON line.
        #[test]
        fn parser_total_on_arbitrary_bytes(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
            let _ = parse_request(&bytes);
        }

        #[test]
        fn parser_total_on_jsonish_text(s in r#"[{}\[\]":,a-z0-9 .\\-]{0,200}"#) {
            match parse_request(s.as_bytes()) {
                Ok(r) => proptest::prop_assert_eq!(r.v, PROTO_VERSION),
                Err((_, e)) => {
                    let v = reply_of(None, &Err(e));
                    proptest::prop_assert_eq!(&v["ok"], &Value::Bool(false));
                }
            }
        }

        #[test]
        fn mutated_valid_requests_never_panic(pos in 0usize..80, byte in proptest::num::u8::ANY) {
            let mut line = br#"{"v":1,"id":9,"cmd":"set.add","set":"s","elems":["10.0.0.1"],"timeout":5}"#.to_vec();
            let p = pos % line.len();
            line[p] = byte;
            let _ = parse_request(&line);
            line.truncate(p);
            let _ = parse_request(&line);
        }
    }
}
