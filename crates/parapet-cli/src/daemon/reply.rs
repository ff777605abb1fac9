//! What every daemon subcommand shares: the request object it sends, and
//! how a failed request is printed.

use parapet_daemon::ClientError;
use serde_json::{Map, Value};
use std::process::ExitCode;

pub(super) fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

pub(super) fn report(e: &ClientError) {
    match e {
        ClientError::Daemon { reply, msg, .. } => {
            let errs = reply
                .get("error")
                .and_then(|e| e.get("errors"))
                .and_then(Value::as_array);
            match errs {
                Some(list) => list
                    .iter()
                    .filter_map(Value::as_str)
                    .for_each(|l| eprintln!("{l}")),
                None => eprintln!("parapet: {msg}"),
            }
        }
        ClientError::Io(e) => eprintln!("parapet: {e}"),
    }
}

pub(super) fn fail(code: u8, msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("parapet: {msg}");
    ExitCode::from(code)
}
