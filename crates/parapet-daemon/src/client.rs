//! Client side of the control protocol.

use crate::proto::{Reply, PROTO_VERSION};
use serde_json::{Map, Value};
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

/// Default control socket.
pub const DEFAULT_SOCKET: &str = "/run/parapet/parapet.sock";
/// Default state directory.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/parapet";
/// Environment variable naming the socket.
pub const SOCKET_ENV: &str = "PARAPET_SOCKET";

/// The socket to use: the argument, else `$PARAPET_SOCKET`, else
/// [`DEFAULT_SOCKET`].
pub fn socket_path(arg: Option<&Path>) -> PathBuf {
    if let Some(p) = arg {
        return p.to_path_buf();
    }
    match std::env::var_os(SOCKET_ENV) {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => PathBuf::from(DEFAULT_SOCKET),
    }
}

/// An error talking to the daemon.
#[derive(Debug)]
pub enum ClientError {
    /// Connecting, reading or writing failed.
    Io(io::Error),
    /// The daemon answered with an error.
    Daemon {
        /// `error.code`.
        code: String,
        /// `error.msg`.
        msg: String,
        /// The whole reply.
        reply: Reply,
    },
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Io(e) => write!(f, "{e}"),
            ClientError::Daemon { msg, .. } => f.write_str(msg),
        }
    }
}

impl std::error::Error for ClientError {}

impl From<io::Error> for ClientError {
    fn from(e: io::Error) -> Self {
        ClientError::Io(e)
    }
}

/// One connection to `parapetd`. Requests get increasing ids; replies are
/// matched by order (the daemon answers in order) and checked by id.
pub struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    next_id: u64,
    line: Vec<u8>,
}

impl Client {
    /// Connects to `path` (see [`socket_path`]).
    pub fn connect(path: &Path) -> io::Result<Client> {
        let s = UnixStream::connect(path).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot connect to parapetd at {}: {e}", path.display()),
            )
        })?;
        Ok(Client {
            reader: BufReader::with_capacity(1 << 16, s.try_clone()?),
            writer: s,
            next_id: 1,
            line: Vec::new(),
        })
    }

    /// Serializes a request object (adding `v` and a fresh `id`) as one line.
    pub fn encode(&mut self, mut req: Map<String, Value>) -> (u64, Vec<u8>) {
        let id = self.next_id;
        self.next_id += 1;
        req.insert("v".into(), Value::from(PROTO_VERSION));
        req.insert("id".into(), Value::from(id));
        let mut line = serde_json::to_vec(&Value::Object(req)).expect("request serializes");
        line.push(b'\n');
        (id, line)
    }

    /// Allocates a request id (for callers that write their own lines).
    pub fn take_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id - 1
    }

    /// Reads the next reply line.
    pub fn read_reply(&mut self) -> io::Result<Reply> {
        self.line.clear();
        if self.reader.read_until(b'\n', &mut self.line)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "parapetd closed the connection",
            ));
        }
        Reply::parse(&self.line).map_err(io::Error::other)
    }

    /// Sends one request and waits for its reply; a daemon error becomes
    /// [`ClientError::Daemon`].
    pub fn call(&mut self, req: Value) -> Result<Reply, ClientError> {
        let Value::Object(m) = req else {
            return Err(ClientError::Io(io::Error::other(
                "a request is a JSON object",
            )));
        };
        let (id, line) = self.encode(m);
        self.writer.write_all(&line)?;
        let r = self.read_reply()?;
        if r.id != Some(id) {
            return Err(ClientError::Io(io::Error::other(format!(
                "reply for request {:?}, expected {id}",
                r.id
            ))));
        }
        match r.error() {
            None => Ok(r),
            Some((code, msg)) => Err(ClientError::Daemon {
                code,
                msg,
                reply: r,
            }),
        }
    }

    /// Sends pre-encoded request lines (each ending in a newline) pipelined
    /// and returns the replies in order. A writer thread sends while this
    /// thread reads, so neither side's socket buffer can fill up and
    /// deadlock, however many requests there are.
    pub fn pipeline(&mut self, lines: Vec<Vec<u8>>) -> io::Result<Vec<Reply>> {
        self.pipeline_with(lines, |_| {})
    }

    /// As [`Client::pipeline`], calling `on_reply(k)` after the `k`th
    /// reply arrived (for progress).
    pub fn pipeline_with(
        &mut self,
        lines: Vec<Vec<u8>>,
        mut on_reply: impl FnMut(usize),
    ) -> io::Result<Vec<Reply>> {
        let n = lines.len();
        let mut w = self.writer.try_clone()?;
        let writer = std::thread::spawn(move || -> io::Result<()> {
            let mut buf = Vec::with_capacity(1 << 16);
            for l in lines {
                buf.extend_from_slice(&l);
                if buf.len() >= 1 << 16 {
                    w.write_all(&buf)?;
                    buf.clear();
                }
            }
            w.write_all(&buf)
        });
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            match self.read_reply() {
                Ok(r) => {
                    out.push(r);
                    on_reply(out.len());
                }
                Err(e) => {
                    let _ = writer.join();
                    return Err(e);
                }
            }
        }
        writer
            .join()
            .map_err(|_| io::Error::other("writer thread panicked"))??;
        Ok(out)
    }

    /// Writes raw bytes (tests, tools).
    pub fn send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.writer.write_all(bytes)
    }
}
