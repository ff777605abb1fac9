//! How the metrics are exposed (parapetd's `--metrics*` flags), and the
//! rule that keeps a listener local unless asked otherwise. A leaf, so the
//! daemon's settings ([`crate::shared::Config`]) can hold it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Default cap on per-rule series (`--metrics-max-rules`).
pub const DEFAULT_MAX_RULE_SERIES: usize = 1000;
/// Where and how the metrics are exposed (parapetd's `--metrics*` flags).
#[derive(Clone, Debug)]
pub struct MetricsConfig {
    /// `--metrics ADDR:PORT`: serve `/metrics` over HTTP there.
    pub listen: Option<SocketAddr>,
    /// `--metrics-allow-remote`: allow a non-loopback `listen` address.
    pub allow_remote: bool,
    /// `--metrics-textfile DIR`: write `DIR/parapet.prom` periodically.
    pub textfile: Option<PathBuf>,
    /// How often the text file is rewritten.
    pub textfile_interval: Duration,
    /// Most per-rule series; the rest are summed into `rule="other"`.
    pub max_rule_series: usize,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            listen: None,
            allow_remote: false,
            textfile: None,
            textfile_interval: Duration::from_secs(15),
            max_rule_series: DEFAULT_MAX_RULE_SERIES,
        }
    }
}

impl MetricsConfig {
    /// Refuses a listener on a non-loopback address unless allowed: the
    /// daemon opens no network listener unless asked, and a remote one
    /// only when asked twice.
    pub fn check(&self) -> Result<(), String> {
        match self.listen {
            Some(a) if !a.ip().is_loopback() && !self.allow_remote => Err(format!(
                "--metrics {a}: not a loopback address; add --metrics-allow-remote to serve metrics to other hosts"
            )),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_listener_needs_explicit_consent() {
        let mut c = MetricsConfig {
            listen: Some("0.0.0.0:9100".parse().unwrap()),
            ..MetricsConfig::default()
        };
        assert!(c.check().is_err());
        c.allow_remote = true;
        assert!(c.check().is_ok());
        c.listen = Some("[::1]:9100".parse().unwrap());
        c.allow_remote = false;
        assert!(c.check().is_ok());
    }
}
