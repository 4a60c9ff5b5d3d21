//! The NodeManager this agent serves, as the judge of which containers are its node's.
//!
//! A container's name tells the agent it is a YARN container, not whose. Where several
//! NodeManagers share one Docker daemon (the compose cluster, or NodeManagers stacked on
//! one host), every agent would see every node's containers. With `--nodemanager` the
//! agent asks its NodeManager's REST API (`/ws/v1/node/containers`) and refuses to change a
//! container the NodeManager does not list. Containers the agent has already changed stay
//! its own: restoring them never waits on the NodeManager.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cluster::ContainerId;
use crate::config::settings::{KerberosSettings, YarnTls};
use crate::kerberos::Spnego;
use crate::yarn::client::describe_reqwest;
use crate::yarn::dto::NmContainersResponse;

/// How long one listing answers "is this container on my node" before it is asked again.
const FRESH_FOR: Duration = Duration::from_secs(1);
/// Largest listing accepted: a NodeManager runs hundreds of containers, not millions.
const MAX_BODY_BYTES: usize = 16 << 20;

#[derive(Debug, thiserror::Error)]
pub enum NodeManagerError {
    #[error("--nodemanager {url:?}: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("NodeManager {url} could not say which containers are on this node: {reason}")]
    Unavailable { url: String, reason: String },
    #[error("--nodemanager-principal/--nodemanager-keytab: {0}")]
    Kerberos(#[from] crate::kerberos::KerberosError),
}

/// One NodeManager's list of containers, fetched on demand and briefly cached.
pub struct NodeManager {
    /// `http(s)://host:port`, no trailing slash.
    url: String,
    client: reqwest::Client,
    /// SPNEGO, for a NodeManager under `hadoop.http.authentication.type=kerberos`.
    spnego: Option<Spnego>,
    cache: tokio::sync::Mutex<Option<(Instant, Arc<HashSet<ContainerId>>)>>,
}

impl std::fmt::Debug for NodeManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeManager")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl NodeManager {
    /// `url` is the NodeManager's web address (yarn.nodemanager.webapp.address), with
    /// scheme: `http://nm1:8042`.
    pub fn new(
        url: &str,
        timeout: Duration,
        tls: &YarnTls,
    ) -> Result<NodeManager, NodeManagerError> {
        let bad = |reason: &str| NodeManagerError::BadUrl {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        let parsed = reqwest::Url::parse(url).map_err(|e| bad(&e.to_string()))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(bad("the scheme must be http or https"));
        }
        if parsed.host_str().is_none_or(str::is_empty) {
            return Err(bad("no host"));
        }
        if parsed.path() != "/" || parsed.query().is_some() {
            return Err(bad(
                "give only scheme, host and port; the agent adds /ws/v1/node/containers",
            ));
        }
        let client = crate::tls::yarn_client_builder(tls, "the NodeManager CA file")
            .map_err(|e| bad(&e.to_string()))?
            .timeout(timeout)
            .build()
            .map_err(|e| bad(&e.to_string()))?;
        Ok(NodeManager {
            url: url.trim_end_matches('/').to_string(),
            client,
            spnego: None,
            cache: tokio::sync::Mutex::new(None),
        })
    }

    /// Authenticates with SPNEGO as `kerberos` says; checks its keytab now.
    pub fn with_kerberos(
        mut self,
        kerberos: Option<&KerberosSettings>,
    ) -> Result<NodeManager, NodeManagerError> {
        self.spnego = kerberos.map(Spnego::new).transpose()?;
        Ok(self)
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// The containers the NodeManager lists, at most [`FRESH_FOR`] old, or fresh when
    /// `fresh` is set.
    pub async fn containers(
        &self,
        fresh: bool,
    ) -> Result<Arc<HashSet<ContainerId>>, NodeManagerError> {
        let mut cache = self.cache.lock().await;
        if let Some((at, set)) = cache.as_ref()
            && !fresh
            && at.elapsed() < FRESH_FOR
        {
            return Ok(set.clone());
        }
        let set = Arc::new(self.fetch().await?);
        *cache = Some((Instant::now(), set.clone()));
        Ok(set)
    }

    /// Whether the NodeManager lists `id`. A container missing from a cached listing is
    /// asked about again: it may have started since.
    pub async fn lists(&self, id: ContainerId) -> Result<bool, NodeManagerError> {
        if self.containers(false).await?.contains(&id) {
            return Ok(true);
        }
        Ok(self.containers(true).await?.contains(&id))
    }

    async fn fetch(&self) -> Result<HashSet<ContainerId>, NodeManagerError> {
        let unavailable = |reason: String| NodeManagerError::Unavailable {
            url: self.url.clone(),
            reason,
        };
        let url = reqwest::Url::parse(&format!("{}/ws/v1/node/containers", self.url))
            .map_err(|e| unavailable(e.to_string()))?;
        let build = || {
            self.client
                .get(url.clone())
                .header(reqwest::header::ACCEPT, "application/json")
        };
        let sent = crate::kerberos::send_with(self.spnego.as_ref(), &url, build)
            .await
            .map_err(|e| unavailable(e.to_string()))?;
        let mut resp = sent.map_err(|e| unavailable(describe_reqwest(&e)))?;
        if !resp.status().is_success() {
            return Err(unavailable(format!("HTTP {}", resp.status())));
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| unavailable(describe_reqwest(&e)))?
        {
            if body.len() + chunk.len() > MAX_BODY_BYTES {
                return Err(unavailable(format!(
                    "the listing is larger than {MAX_BODY_BYTES} bytes"
                )));
            }
            body.extend_from_slice(&chunk);
        }
        parse_listing(&body).map_err(unavailable)
    }
}

/// The container ids of a `/ws/v1/node/containers` JSON body. Ids that do not parse are
/// left out (they cannot name a container the agent would touch).
pub fn parse_listing(body: &[u8]) -> Result<HashSet<ContainerId>, String> {
    let parsed: NmContainersResponse =
        serde_json::from_slice(body).map_err(|e| format!("unreadable listing: {e}"))?;
    Ok(parsed
        .into_list()
        .into_iter()
        .filter_map(|c| c.id.parse().ok())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listings_parse_in_the_shapes_nodemanagers_send() {
        let one = br#"{"containers":{"container":[{"id":"container_1700000000000_0001_01_000002","state":"RUNNING"},{"id":"garbage"}]}}"#;
        let ids = parse_listing(one).unwrap();
        assert_eq!(ids.len(), 1);
        assert!(ids.contains(&"container_1700000000000_0001_01_000002".parse().unwrap()));
        // An empty NodeManager answers with null or an empty object.
        assert!(parse_listing(br#"{"containers":null}"#).unwrap().is_empty());
        assert!(parse_listing(br#"{"containers":{}}"#).unwrap().is_empty());
        assert!(parse_listing(b"<html>").is_err());
    }

    #[test]
    fn a_kerberos_keytab_others_can_read_is_refused_at_start() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let keytab = dir.path().join("agent.keytab");
        std::fs::write(&keytab, b"\x05\x02").unwrap();
        std::fs::set_permissions(&keytab, std::fs::Permissions::from_mode(0o640)).unwrap();
        let kerberos = KerberosSettings {
            principal: "preemptor/nm1@EXAMPLE.COM".into(),
            keytab: keytab.clone(),
        };
        let nm = || NodeManager::new("https://nm1:8044", t1(), &YarnTls::default()).unwrap();
        let e = nm().with_kerberos(Some(&kerberos)).unwrap_err();
        assert!(matches!(e, NodeManagerError::Kerberos(_)), "{e}");
        assert!(
            e.to_string()
                .starts_with("--nodemanager-principal/--nodemanager-keytab: "),
            "{e}"
        );
        assert!(e.to_string().contains("chmod 600"), "{e}");
        std::fs::set_permissions(&keytab, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(nm().with_kerberos(Some(&kerberos)).is_ok());
        assert!(nm().with_kerberos(None).is_ok());
    }

    #[test]
    fn urls_are_checked() {
        let t = Duration::from_secs(1);
        let tls = YarnTls::default();
        assert!(NodeManager::new("http://nm1:8042", t, &tls).is_ok());
        assert_eq!(
            NodeManager::new("http://nm1:8042/", t, &tls).unwrap().url(),
            "http://nm1:8042"
        );
        for bad in [
            "nm1:8042",
            "ftp://nm1",
            "http://nm1:8042/ws/v1/node",
            "http://",
        ] {
            assert!(NodeManager::new(bad, t, &tls).is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn an_unreachable_nodemanager_is_an_error_not_an_empty_node() {
        // A port nothing listens on: bind, note it, close.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let nm = NodeManager::new(
            &format!("http://127.0.0.1:{port}"),
            t1(),
            &YarnTls::default(),
        )
        .unwrap();
        let e = nm
            .lists("container_1_0001_01_000001".parse().unwrap())
            .await;
        assert!(
            matches!(e, Err(NodeManagerError::Unavailable { .. })),
            "{e:?}"
        );
    }

    fn t1() -> Duration {
        Duration::from_secs(1)
    }
}
