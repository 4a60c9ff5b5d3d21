//! The act side towards the nodes, as a trait so that the demo can plug in a simulated
//! actuator. [`HttpAgents`] is the real one: a `preemptor agent` per NodeManager host.
//!
//! Agents are addressed by a key (the agent's URL for [`HttpAgents`]); several nodes may
//! share one agent (NodeManagers on one host, as in the emulator), so the controller asks
//! each distinct agent once per tick.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;

use crate::agent::AgentClient;
use crate::agent::api::{ActionRequest, ActionResult, AgentEvent, ContainerStatus, LeaseStatus};
use crate::agent::client::ClientError;
use crate::cluster::NodeId;
use crate::config::settings::AgentSettings;
use crate::tls::TlsError;

/// Why an agent did not carry out an action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActError {
    pub message: String,
    /// Sending the same request again may help: the agent could not be reached, or failed
    /// inside (5xx). An agent's considered refusal (4xx) is final: a memory cut the kernel
    /// kept refusing already took the agent's whole `--memory-timeout`, and a missing
    /// lease or a foreign container does not change within a retry's backoff.
    pub retry: bool,
}

impl ActError {
    /// A failure worth one more try.
    pub fn transient(message: impl Into<String>) -> ActError {
        ActError {
            message: message.into(),
            retry: true,
        }
    }

    /// A refusal that sending again would only repeat.
    pub fn refused(message: impl Into<String>) -> ActError {
        ActError {
            message: message.into(),
            retry: false,
        }
    }
}

impl std::fmt::Display for ActError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Something that changes containers' limits on nodes.
pub trait Actuator: Send + Sync + 'static {
    /// The key of the agent that acts on `node`, if any does.
    fn agent_for(&self, node: &NodeId) -> Option<String>;
    /// Carries out one action on a container of `agent`.
    fn act(&self, agent: &str, req: ActionRequest)
    -> BoxFuture<'_, Result<ActionResult, ActError>>;
    /// Every YARN container `agent` knows, with its current and original limits.
    fn containers(&self, agent: &str) -> BoxFuture<'_, Result<Vec<ContainerStatus>, String>>;
    /// Keeps `agent` from resuming everything on its own for `ttl`; returns the lease as
    /// the agent now holds it.
    fn renew_lease(&self, agent: &str, ttl: Duration)
    -> BoxFuture<'_, Result<LeaseStatus, String>>;
    /// The agent's event stream; the controller ticks at once on each event. An actuator
    /// without events returns an error and the controller relies on its timer.
    fn events(
        &self,
        agent: &str,
    ) -> BoxFuture<'_, Result<BoxStream<'static, Result<AgentEvent, String>>, String>> {
        let agent = agent.to_string();
        Box::pin(async move { Err(format!("{agent}: no event stream")) })
    }
}

/// The `preemptor agent`s of the cluster, over HTTP.
pub struct HttpAgents {
    /// NodeManager host -> agent URL, from `yarn.preemptor.agent.addresses`.
    explicit: BTreeMap<String, String>,
    port: u16,
    token: String,
    timeout: Duration,
    action_timeout: Duration,
    holder: String,
    /// Set: every agent is reached over HTTPS and verified with it.
    tls: Option<rustls::ClientConfig>,
    clients: std::sync::Mutex<BTreeMap<String, Arc<AgentClient>>>,
}

impl HttpAgents {
    /// `holder` names this controller in the agents' leases. Reads the agents' CA file
    /// if `yarn.preemptor.agent.tls.ca-file` names one.
    pub fn new(
        settings: &AgentSettings,
        token: &str,
        holder: &str,
    ) -> Result<HttpAgents, TlsError> {
        let tls = settings
            .tls_ca_file
            .as_deref()
            .map(crate::tls::client_config)
            .transpose()?;
        let upgrade = |url: &String| match &tls {
            // Never downgrades: with a CA, every agent is reached over HTTPS.
            Some(_) => url.replacen("http://", "https://", 1),
            None => url.clone(),
        };
        Ok(HttpAgents {
            explicit: settings
                .addresses
                .iter()
                .map(|(host, url)| (host.clone(), upgrade(url)))
                .collect(),
            port: settings.port,
            token: token.trim().to_string(),
            timeout: Duration::from_millis(settings.request_timeout_ms),
            action_timeout: Duration::from_millis(settings.action_timeout_ms),
            holder: holder.to_string(),
            tls,
            clients: std::sync::Mutex::new(BTreeMap::new()),
        })
    }

    fn client(&self, agent: &str) -> Result<Arc<AgentClient>, String> {
        let mut clients = self
            .clients
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(c) = clients.get(agent) {
            return Ok(c.clone());
        }
        let c = Arc::new(
            AgentClient::with_tls(agent, &self.token, self.timeout, self.tls.clone())
                .map_err(|e| e.to_string())?
                .with_action_timeout(self.action_timeout),
        );
        clients.insert(agent.to_string(), c.clone());
        Ok(c)
    }
}

impl Actuator for HttpAgents {
    fn agent_for(&self, node: &NodeId) -> Option<String> {
        let host = node.host();
        if let Some(url) = self
            .explicit
            .get(node.as_str())
            .or_else(|| self.explicit.get(host))
        {
            return Some(url.clone());
        }
        if host.is_empty() {
            return None;
        }
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        Some(format!("{scheme}://{host}:{}", self.port))
    }

    fn act(
        &self,
        agent: &str,
        req: ActionRequest,
    ) -> BoxFuture<'_, Result<ActionResult, ActError>> {
        let client = self.client(agent).map_err(ActError::refused);
        Box::pin(async move {
            client?.act(&req).await.map_err(|e| {
                let retry = match &e {
                    ClientError::Api { status, .. } => status.is_server_error(),
                    ClientError::Transport { .. } => true,
                    ClientError::Decode { .. } | ClientError::BadAddress(_) => false,
                };
                ActError {
                    message: e.to_string(),
                    retry,
                }
            })
        })
    }

    fn containers(&self, agent: &str) -> BoxFuture<'_, Result<Vec<ContainerStatus>, String>> {
        let client = self.client(agent);
        Box::pin(async move { client?.containers().await.map_err(|e| e.to_string()) })
    }

    fn renew_lease(
        &self,
        agent: &str,
        ttl: Duration,
    ) -> BoxFuture<'_, Result<LeaseStatus, String>> {
        let client = self.client(agent);
        Box::pin(async move {
            client?
                .renew_lease(&self.holder, Some(ttl))
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn events(
        &self,
        agent: &str,
    ) -> BoxFuture<'_, Result<BoxStream<'static, Result<AgentEvent, String>>, String>> {
        let client = self.client(agent);
        Box::pin(async move {
            let stream = client?.events().await.map_err(|e| e.to_string())?;
            Ok(stream.map(|r| r.map_err(|e| e.to_string())).boxed())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_map_to_explicit_addresses_else_the_agent_port_on_their_host() {
        let settings = AgentSettings {
            addresses: vec![
                ("nm1.example.com".into(), "http://10.0.0.1:9000".into()),
                ("127.0.0.1:45454".into(), "http://127.0.0.1:7000".into()),
            ],
            ..crate::config::settings::PreemptorSettings::default().agent
        };
        let a = HttpAgents::new(&settings, "t", "c").unwrap();
        assert_eq!(
            a.agent_for(&NodeId::new("nm1.example.com:8041")).as_deref(),
            Some("http://10.0.0.1:9000")
        );
        assert_eq!(
            a.agent_for(&NodeId::new("127.0.0.1:45454")).as_deref(),
            Some("http://127.0.0.1:7000"),
            "a full node id is matched before its host"
        );
        assert_eq!(
            a.agent_for(&NodeId::new("nm2:8041")),
            Some(format!("http://nm2:{}", settings.port))
        );
    }
}
