//! TLS between the controller and the agents (optional), and towards YARN's HTTPS web
//! endpoints ([`YarnTls`]): rustls with the `ring` provider, certificates and keys in
//! PEM files. The agent serves with a certificate
//! and key ([`server_config`], [`TlsListener`]); the controller verifies the agents
//! against a CA file ([`client_config`]). The bearer token still authenticates the
//! controller.
//!
//! Every HTTP client of the crate is built with [`http_client_builder`]: reqwest is
//! compiled with rustls but no provider of its own, so `ring` is installed as the
//! process default before the first client is built (clippy.toml forbids building
//! clients any other way).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Once};
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::config::secret::{SecretFileError, read_secret_file};
use crate::config::settings::YarnTls;

/// A certificate chain or CA bundle is a few kilobytes.
const MAX_PEM_BYTES: u64 = 1 << 20;

/// A client that has not finished its handshake by then is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading {what} {path}: {error}")]
    Read {
        what: &'static str,
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{what} {path} is larger than {MAX_PEM_BYTES} bytes")]
    TooLarge { what: &'static str, path: PathBuf },
    #[error("{what} {path}: {reason}")]
    Pem {
        what: &'static str,
        path: PathBuf,
        reason: String,
    },
    #[error(transparent)]
    Key(#[from] SecretFileError),
    #[error("{0}")]
    Config(String),
}

/// The crypto provider of every TLS configuration here.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The only way the crate builds reqwest clients: it makes sure a rustls provider is
/// installed first, which reqwest needs even for plain `http://` clients.
///
/// Where the system has no trust store at all (a `FROM scratch` image), reqwest's
/// platform verifier cannot start and every client, even a plain-HTTP one, would fail to
/// build; such a process gets clients with an empty set of roots instead, so that HTTP
/// works and HTTPS trusts only the CAs a caller adds.
#[allow(clippy::disallowed_methods)]
pub fn http_client_builder() -> reqwest::ClientBuilder {
    static INSTALL: Once = Once::new();
    static SYSTEM_ROOTS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    INSTALL.call_once(|| {
        // Err only when another provider was installed first, which serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    let system_roots = *SYSTEM_ROOTS.get_or_init(|| match reqwest::Client::builder().build() {
        Ok(_) => true,
        Err(e) => {
            tracing::warn!(error = %e, "no system trust store: HTTPS trusts only configured CAs");
            false
        }
    });
    if system_roots {
        reqwest::Client::builder()
    } else {
        reqwest::Client::builder().tls_certs_only(Vec::new())
    }
}

/// A client builder that verifies YARN's certificates (an RM's, a NodeManager's) as
/// `tls` says. `what` names the CA file in errors ("the RM CA file").
pub fn yarn_client_builder(
    tls: &YarnTls,
    what: &'static str,
) -> Result<reqwest::ClientBuilder, TlsError> {
    let mut builder = http_client_builder();
    if let Some(ca) = &tls.ca_file {
        let mut roots = Vec::new();
        for der in certificates(ca, what)? {
            roots.push(
                reqwest::Certificate::from_der(&der).map_err(|e| TlsError::Pem {
                    what,
                    path: ca.clone(),
                    reason: format!("not a usable CA certificate: {e}"),
                })?,
            );
        }
        builder = builder.tls_certs_only(roots);
    }
    Ok(builder.tls_danger_accept_invalid_hostnames(!tls.verify_hostname))
}

fn read_public(path: &Path, what: &'static str) -> Result<Vec<u8>, TlsError> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|error| TlsError::Read {
        what,
        path: path.to_path_buf(),
        error,
    })?;
    let mut raw = Vec::new();
    file.take(MAX_PEM_BYTES + 1)
        .read_to_end(&mut raw)
        .map_err(|error| TlsError::Read {
            what,
            path: path.to_path_buf(),
            error,
        })?;
    if raw.len() as u64 > MAX_PEM_BYTES {
        return Err(TlsError::TooLarge {
            what,
            path: path.to_path_buf(),
        });
    }
    Ok(raw)
}

fn certificates(path: &Path, what: &'static str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let raw = read_public(path, what)?;
    let pem_error = |reason: String| TlsError::Pem {
        what,
        path: path.to_path_buf(),
        reason,
    };
    let certs = CertificateDer::pem_slice_iter(&raw)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(e.to_string()))?;
    if certs.is_empty() {
        return Err(pem_error(
            "no PEM certificate (-----BEGIN CERTIFICATE-----) in it".into(),
        ));
    }
    Ok(certs)
}

/// The agent's TLS configuration: its certificate chain (leaf first) and private key,
/// both PEM. The key file must be private (`chmod 600`), like a token file.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let chain = certificates(cert, "the TLS certificate file")?;
    let what = "TLS key file";
    let raw = read_secret_file(key, what, MAX_PEM_BYTES)?;
    let key_der = PrivateKeyDer::from_pem_slice(&raw).map_err(|e| TlsError::Pem {
        what: "the TLS key file",
        path: key.to_path_buf(),
        reason: format!("no usable PEM private key ({e})"),
    })?;
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key_der)
        .map_err(|e| TlsError::Config(format!("{} and {}: {e}", cert.display(), key.display())))?;
    Ok(Arc::new(config))
}

/// The controller's TLS configuration towards the agents: it trusts the CA
/// certificates in `ca` (PEM) and nothing else.
pub fn client_config(ca: &Path) -> Result<rustls::ClientConfig, TlsError> {
    let what = "the agents' CA file";
    let mut roots = rustls::RootCertStore::empty();
    for cert in certificates(ca, what)? {
        roots.add(cert).map_err(|e| TlsError::Pem {
            what,
            path: ca.to_path_buf(),
            reason: format!("not a usable CA certificate: {e}"),
        })?;
    }
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(config)
}

/// A TCP listener whose connections are TLS, for `axum::serve`. Handshakes run
/// concurrently, each bounded by a timeout, so a slow or silent client holds up no one.
pub struct TlsListener {
    local: SocketAddr,
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    acceptor: tokio::task::JoinHandle<()>,
}

impl TlsListener {
    pub fn new(listener: TcpListener, config: Arc<rustls::ServerConfig>) -> std::io::Result<Self> {
        let local = listener.local_addr()?;
        let (tx, ready) = mpsc::channel(64);
        let tls = TlsAcceptor::from(config);
        let acceptor = tokio::spawn(async move {
            loop {
                let (tcp, peer) = match listener.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        // Out of file descriptors and the like: wait instead of spinning.
                        tracing::warn!(error = %e, "accepting a connection");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let (tls, tx) = (tls.clone(), tx.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.accept(tcp)).await {
                        Ok(Ok(stream)) => {
                            let _ = tx.send((stream, peer)).await;
                        }
                        Ok(Err(e)) => {
                            tracing::debug!(%peer, error = %e, "TLS handshake failed");
                        }
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(TlsListener {
            local,
            ready,
            acceptor,
        })
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        // The accept loop owns the socket: stopping it frees the port.
        self.acceptor.abort();
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(c) => c,
            // Only if the accept loop died, which it does not on its own.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn write(path: &Path, text: &str, mode: u32) {
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// A CA and a certificate for `localhost` / 127.0.0.1 it signed: (ca, cert, key) PEM.
    fn pki() -> (String, String, String) {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = rcgen::CertifiedIssuer::self_signed(ca, ca_key).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let leaf = rcgen::CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .signed_by(&key, &ca)
            .unwrap();
        (ca.pem(), leaf.pem(), key.serialize_pem())
    }

    #[test]
    fn a_certificate_and_a_private_key_make_a_server_config() {
        let tmp = tempfile::tempdir().unwrap();
        let (ca, cert, key) = pki();
        let (c, k, a) = (
            tmp.path().join("agent.crt"),
            tmp.path().join("agent.key"),
            tmp.path().join("ca.crt"),
        );
        write(&c, &cert, 0o644);
        write(&k, &key, 0o600);
        write(&a, &ca, 0o644);
        assert!(server_config(&c, &k).is_ok());
        assert!(client_config(&a).is_ok());

        // The key is a secret: same rules as a token file.
        std::fs::set_permissions(&k, std::fs::Permissions::from_mode(0o640)).unwrap();
        let e = server_config(&c, &k).unwrap_err().to_string();
        assert!(e.contains("TLS key file") && e.contains("0640"), "{e}");
    }

    #[test]
    fn wrong_files_are_named_with_what_is_wrong() {
        let tmp = tempfile::tempdir().unwrap();
        let (_, cert, key) = pki();
        let (c, k, junk) = (
            tmp.path().join("agent.crt"),
            tmp.path().join("agent.key"),
            tmp.path().join("junk"),
        );
        write(&c, &cert, 0o644);
        write(&k, &key, 0o600);
        write(&junk, "not pem at all\n", 0o600);

        let e = server_config(&junk, &k).unwrap_err().to_string();
        assert!(
            e.contains("no PEM certificate") && e.contains("junk"),
            "{e}"
        );
        let e = server_config(&c, &junk).unwrap_err().to_string();
        assert!(e.contains("no usable PEM private key"), "{e}");
        // A certificate where the key belongs.
        write(&junk, &cert, 0o600);
        assert!(server_config(&c, &junk).is_err());
        let e = client_config(&tmp.path().join("none"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("the agents' CA file") && e.contains("none"),
            "{e}"
        );
        // A key that does not match the certificate.
        let (_, _, other_key) = pki();
        write(&k, &other_key, 0o600);
        let e = server_config(&c, &k).unwrap_err().to_string();
        assert!(e.contains("agent.crt"), "{e}");
    }
}
