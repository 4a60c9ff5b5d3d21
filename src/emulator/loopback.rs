//! Many HTTP services of one process behind ONE listening socket, each at its own loopback
//! address on the same port: service `i` is `first + i` (127.1.0.1, 127.1.0.2, ...). The
//! socket is bound to 0.0.0.0 and a connection goes to the service whose address it was
//! made to. For thousands of emulated NodeManagers and dry-run agents in one process: a
//! listener each costs an open file each, and at 5,000 nodes those plus the connections
//! to them exceed a 20,000 open-file limit.
//!
//! Why addresses and not path prefixes (`http://127.0.0.1:PORT/nodes/7`): the controller
//! takes agent addresses as `http://host:port` only, today and in the earlier builds the
//! load bench compares against, and a NodeManager's id is its `host:port`. Distinct
//! addresses also keep clients' connections from sharing one destination's ephemeral
//! ports. All of 127/8 is loopback on Linux.

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use axum::Router;
use axum::http::StatusCode;
use axum::serve::{IncomingStream, Listener};
use tokio::net::{TcpListener, TcpStream};

use super::EmulatorError;

/// Connections waiting to be accepted (the kernel caps it at `net.core.somaxconn`). A
/// controller opens an event stream to every agent at once on its first tick; with one
/// listener for all of them, a short queue would drop connections into SYN retries.
const ACCEPT_BACKLOG: u32 = 65_535;

/// The bound socket and the addresses it serves; [`LoopbackHosts::serve`] starts serving.
pub(crate) struct LoopbackHosts {
    listener: TcpListener,
    first: Ipv4Addr,
    count: usize,
    port: u16,
}

impl LoopbackHosts {
    /// Binds a free port on every address, for `count` services from `first` on.
    pub(crate) fn bind(first: Ipv4Addr, count: usize) -> Result<LoopbackHosts, EmulatorError> {
        if !first.is_loopback() || count.checked_sub(1).and_then(|l| ip(first, l)).is_none() {
            return Err(EmulatorError::Config(format!(
                "{count} services from {first}: not all on loopback addresses"
            )));
        }
        let addr = SocketAddr::from(([0, 0, 0, 0], 0));
        let err = |source| EmulatorError::Bind { addr, source };
        let socket = tokio::net::TcpSocket::new_v4().map_err(err)?;
        socket.bind(addr).map_err(err)?;
        let listener = socket.listen(ACCEPT_BACKLOG).map_err(err)?;
        let port = listener.local_addr().map_err(err)?.port();
        Ok(LoopbackHosts {
            listener,
            first,
            count,
            port,
        })
    }

    /// The address of service `i`, if there is one.
    pub(crate) fn addr(&self, i: usize) -> Option<SocketAddr> {
        (i < self.count)
            .then(|| ip(self.first, i))
            .flatten()
            .map(|ip| SocketAddr::from((ip, self.port)))
    }

    /// Serves `routers[i]` at [`LoopbackHosts::addr`]`(i)` until `shutdown`, then waits
    /// for open connections as `axum::serve` does.
    pub(crate) async fn serve(
        self,
        routers: Vec<Router>,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let routers: std::sync::Arc<[Router]> = routers.into();
        let count = self.count.min(routers.len());
        let first = self.first;
        // The connection's own destination picks the service, once per connection: no
        // routing over thousands of services per request.
        let make_service = move |incoming: IncomingStream<'_, OnlyOurs>| {
            let router = incoming
                .io()
                .local_addr()
                .ok()
                .and_then(|a| index(first, count, a.ip()))
                .and_then(|i| routers.get(i).cloned())
                .unwrap_or_else(misdirected);
            std::future::ready(Ok::<_, Infallible>(router))
        };
        let listener = OnlyOurs {
            inner: self.listener,
            first,
            count,
        };
        axum::serve(listener, tower::service_fn(make_service))
            .with_graceful_shutdown(shutdown)
            .await
    }
}

/// `first + i`, below 127.255.255.255 (loopback's broadcast address).
fn ip(first: Ipv4Addr, i: usize) -> Option<Ipv4Addr> {
    let ip = u32::from(first).checked_add(u32::try_from(i).ok()?)?;
    (ip < u32::from(Ipv4Addr::new(127, 255, 255, 255))).then(|| Ipv4Addr::from(ip))
}

/// Which of `count` services from `first` a connection made to `to` is for.
fn index(first: Ipv4Addr, count: usize, to: IpAddr) -> Option<usize> {
    let IpAddr::V4(v4) = to else { return None };
    let i = usize::try_from(u32::from(v4).checked_sub(u32::from(first))?).ok()?;
    (i < count).then_some(i)
}

/// For a connection no service lives at; [`OnlyOurs`] drops those before they get here.
fn misdirected() -> Router {
    Router::new().fallback(|| async {
        (
            StatusCode::MISDIRECTED_REQUEST,
            "no emulated service at this address",
        )
    })
}

/// The listener, bound to all addresses because no socket can be bound to a range of
/// them; so it closes at once any connection made to an address that is not a service's,
/// which includes every one from outside this machine.
struct OnlyOurs {
    inner: TcpListener,
    first: Ipv4Addr,
    count: usize,
}

impl Listener for OnlyOurs {
    type Io = TcpStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (TcpStream, SocketAddr) {
        loop {
            let (stream, peer) = Listener::accept(&mut self.inner).await;
            let ours = stream
                .local_addr()
                .is_ok_and(|a| index(self.first, self.count, a.ip()).is_some());
            if ours {
                return (stream, peer);
            }
            tracing::debug!(%peer, "closing a connection to no emulated service's address");
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::get;

    const FIRST: Ipv4Addr = Ipv4Addr::new(127, 1, 0, 1);

    #[test]
    fn each_service_has_its_own_loopback_address() {
        assert_eq!(ip(FIRST, 4999), Some(Ipv4Addr::new(127, 1, 19, 136)));
        for i in [0, 254, 255, 256, 4999] {
            let a = ip(FIRST, i).map(IpAddr::V4);
            assert_eq!(a.and_then(|a| index(FIRST, 5000, a)), Some(i));
        }
        assert_eq!(index(FIRST, 4999, IpAddr::from([127, 1, 19, 136])), None);
        assert_eq!(index(FIRST, 5000, IpAddr::from([127, 0, 0, 1])), None);
        assert_eq!(index(FIRST, 5000, IpAddr::from([10, 1, 0, 1])), None);
        assert_eq!(index(FIRST, 5000, "::1".parse().unwrap()), None);
        assert!(ip(FIRST, usize::MAX).is_none());
        assert!(ip(FIRST, 1 << 24).is_none(), "beyond 127/8");
        assert!(LoopbackHosts::bind(FIRST, 1 << 24).is_err());
        assert!(LoopbackHosts::bind(Ipv4Addr::new(10, 0, 0, 1), 1).is_err());
    }

    #[tokio::test]
    async fn a_connection_reaches_the_service_at_its_address_and_no_other() {
        let hosts = LoopbackHosts::bind(FIRST, 3).unwrap();
        let addrs: Vec<SocketAddr> = (0..3).map(|i| hosts.addr(i).unwrap()).collect();
        assert_eq!(hosts.addr(3), None);
        let routers = (0..3)
            .map(|i| Router::new().route("/", get(move || async move { format!("service {i}") })))
            .collect();
        let cancel = tokio_util::sync::CancellationToken::new();
        let server = tokio::spawn(hosts.serve(routers, cancel.clone().cancelled_owned()));
        let http = crate::tls::http_client_builder().build().unwrap();
        for (i, a) in addrs.iter().enumerate() {
            let body = http.get(format!("http://{a}/")).send().await.unwrap();
            assert_eq!(body.text().await.unwrap(), format!("service {i}"));
        }
        // Nothing at 127.0.0.1 on that port: closed unanswered.
        let stray = format!("http://127.0.0.1:{}/", addrs[0].port());
        assert!(http.get(stray).send().await.is_err());
        cancel.cancel();
        server.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn an_emulator_serves_every_node_manager_behind_one_listener() {
        use crate::emulator::{Emulator, EmulatorConfig, RuntimeChoice};
        use crate::resources::Resource;
        use crate::yarn::dto::NmNodeInfoResponse;
        let mut config = EmulatorConfig::local(3, Resource::new(4096, 4), RuntimeChoice::Simulated);
        config.nm_one_listener = true;
        let h = Emulator::start(config).await.unwrap();
        let http = crate::tls::http_client_builder().build().unwrap();
        let port = h.nodes()[0]
            .id
            .as_str()
            .rsplit(':')
            .next()
            .unwrap()
            .to_string();
        for (i, n) in h.nodes().iter().enumerate() {
            assert_eq!(n.id.as_str(), format!("127.2.0.{}:{port}", i + 1));
            let info: NmNodeInfoResponse = http
                .get(format!("{}/ws/v1/node/info", n.url))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            assert_eq!(info.node_info.id, n.id.as_str(), "each its own node");
        }
        h.shutdown().await.unwrap();
    }
}
