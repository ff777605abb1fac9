//! TLS to the CrowdSec Local API (`--crowdsec https://…`): the client
//! configuration, made once at start from the files the flags name (a CA
//! to verify the LAPI, else the system's roots; a client certificate and
//! key, which the LAPI can take instead of an API key), and the handshake
//! over a connected socket. The same options as the real bouncer's
//! `ca_cert_path`, `cert_path` and `key_path`; there is no "skip
//! verification" switch (never fail open).
//!
//! rustls with the `ring` provider: already in the tree through the fleet's
//! NATS client, so no new dependency is compiled for it.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;

/// A TLS client's settings for one LAPI.
#[derive(Clone, Debug)]
pub struct Tls {
    config: Arc<ClientConfig>,
}

/// A TLS stream to the LAPI.
pub type TlsStream = StreamOwned<ClientConnection, TcpStream>;

fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{}:1:1: no PEM certificate in it", path.display()));
    }
    Ok(certs)
}

impl Tls {
    /// Reads the files: `ca` (PEM certificates to trust; `None`: the
    /// system's roots) and `client` (certificate chain and private key,
    /// PEM) for a LAPI that authenticates bouncers by certificate.
    pub fn new(ca: Option<&Path>, client: Option<(&Path, &Path)>) -> Result<Tls, String> {
        let mut roots = RootCertStore::empty();
        match ca {
            Some(p) => {
                for c in certs(p)? {
                    roots
                        .add(c)
                        .map_err(|e| format!("{}: bad CA certificate: {e}", p.display()))?;
                }
            }
            None => {
                let found = rustls_native_certs::load_native_certs();
                roots.add_parsable_certificates(found.certs);
                if roots.is_empty() {
                    return Err(
                        "--crowdsec https://: no system CA certificates found; give --crowdsec-tls-ca"
                            .into(),
                    );
                }
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .with_root_certificates(roots);
        let config = match client {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let chain = certs(cert)?;
                let key = PrivateKeyDer::from_pem_file(key)
                    .map_err(|e| format!("{}: no PEM private key: {e}", key.display()))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| format!("{}: {e}", cert.display()))?
            }
        };
        Ok(Tls {
            config: Arc::new(config),
        })
    }

    /// The handshake with `host` (a DNS name or an IP address, which the
    /// server's certificate must name) over `tcp`, whose timeouts bound it.
    pub fn connect(&self, host: &str, mut tcp: TcpStream) -> Result<TlsStream, String> {
        let name = ServerName::try_from(host.to_string())
            .map_err(|_| format!("`{host}`: not a host name for TLS"))?;
        let mut conn = ClientConnection::new(self.config.clone(), name)
            .map_err(|e| format!("TLS to {host}: {e}"))?;
        // Finished here so that a refused certificate is reported as such,
        // not as a failed request write.
        while conn.is_handshaking() {
            conn.complete_io(&mut tcp)
                .map_err(|e| format!("TLS handshake with {host}: {e}"))?;
        }
        Ok(StreamOwned::new(conn, tcp))
    }
}
