//! The RM reverse proxy: a real third-party client (`yarn-api-client`) submitting
//! through it to the emulator, streaming both ways, headers passed through untouched,
//! and YARN-style errors when no RM answers.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::{any, get, post};
use futures_util::StreamExt;
use preemptor::config::settings::{RouteMatch, RouteRule};
use preemptor::yarn::{RmClient, RmProxy, SubmissionSeen};
use serde_json::Value;
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::emulator_support::run_client_script;
use crate::rm_client::{
    BreakingRm, client, client_before_failover, dead_address, standby_of, start_emulator,
};

/// Serves `proxy` on a free port until the guard is dropped.
async fn serve(proxy: RmProxy) -> (String, DropGuard) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let stop = CancellationToken::new();
    tokio::spawn(proxy.serve(listener, stop.clone()));
    (url, stop.drop_guard())
}

fn proxy_for(
    client: RmClient,
    routes: Vec<RouteRule>,
) -> (RmProxy, mpsc::Receiver<SubmissionSeen>) {
    let (tx, rx) = mpsc::channel(16);
    (RmProxy::new(client, routes, tx).unwrap(), rx)
}

/// A ResourceManager stand-in: `/info` says ACTIVE, the rest is `routes`.
async fn upstream(routes: axum::Router) -> (String, tokio::task::JoinHandle<()>) {
    let app = routes.route(
        "/ws/v1/cluster/info",
        get(|| async {
            (
                [("content-type", "application/json")],
                r#"{"clusterInfo":{"id":1,"haState":"ACTIVE"}}"#,
            )
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yarn_api_client_submits_through_the_proxy_into_the_routed_queue() {
    let h = start_emulator(2).await;
    let rule = RouteRule {
        matcher: RouteMatch::Tag("tpch".into()),
        queue: "short".into(),
    };
    let (proxy, mut seen) = proxy_for(client(&[h.rm_url()]), vec![rule.clone()]);
    let (url, _stop) = serve(proxy).await;

    let out = run_client_script("submit_via_proxy.py", &url).await;

    let routed = out["routed"].as_str().unwrap().to_string();
    let explicit = out["explicit"].as_str().unwrap().to_string();
    assert_eq!(
        out["routed_app"]["queue"], "root.short",
        "no queue named: routed by tag"
    );
    assert_eq!(
        out["explicit_app"]["queue"], "root.long",
        "an explicit queue is kept"
    );
    assert_eq!(
        out["scheduler"]["scheduler"]["schedulerInfo"]["type"],
        "capacityScheduler"
    );
    let in_emulator = h.inspect(|s| s.apps[&routed.parse().unwrap()].queue_name.clone());
    assert_eq!(in_emulator, "short");

    let first = seen.try_recv().expect("the routed submission was reported");
    assert_eq!(first.application_id.to_string(), routed);
    assert_eq!(first.queue, "short");
    assert_eq!(first.requested_queue, "");
    assert_eq!(first.routed_by, Some(rule));
    assert_eq!(first.tags, ["tpch"]);
    assert_eq!(first.application_type, "MAPREDUCE");
    assert!(first.seen_at_ms > 0);
    let second = seen
        .try_recv()
        .expect("the explicit submission was reported");
    assert_eq!(second.application_id.to_string(), explicit);
    assert_eq!(
        (second.queue.as_str(), second.routed_by.as_ref()),
        ("long", None)
    );
    assert!(second.seen_at > first.seen_at);
    assert!(seen.try_recv().is_err(), "one report per submission");
    h.shutdown().await.unwrap();
}

const FIRST: usize = 64 << 10;
const REST: usize = 64 << 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_stream_through_the_proxy_both_ways() {
    // The upstream holds the rest of a 64 MiB answer until the client has received the
    // first chunk through the proxy: a buffering proxy would never deliver it.
    let response_gate = Arc::new(Notify::new());
    let request_gate = Arc::new(Notify::new());
    let big = {
        let gate = response_gate.clone();
        get(move || {
            let gate = gate.clone();
            async move {
                let chunks = futures_util::stream::unfold(0usize, move |sent| {
                    let gate = gate.clone();
                    async move {
                        if sent == 0 {
                            return Some((
                                Ok::<_, std::io::Error>(Bytes::from(vec![b'a'; FIRST])),
                                FIRST,
                            ));
                        }
                        if sent == FIRST {
                            gate.notified().await;
                        }
                        (sent < FIRST + REST)
                            .then(|| (Ok(Bytes::from(vec![b'b'; 1 << 20])), sent + (1 << 20)))
                    }
                });
                Body::from_stream(chunks)
            }
        })
    };
    let upload = {
        let gate = request_gate.clone();
        post(move |req: Request| {
            let gate = gate.clone();
            async move {
                let mut body = req.into_body().into_data_stream();
                let mut total = 0usize;
                let mut first = true;
                while let Some(chunk) = body.next().await {
                    total += chunk.unwrap().len();
                    if first {
                        gate.notify_one();
                        first = false;
                    }
                }
                total.to_string()
            }
        })
    };
    let (rm, task) = upstream(
        axum::Router::new()
            .route("/big", big)
            .route("/upload", upload),
    )
    .await;
    let (proxy, _) = proxy_for(client(&[&rm]), vec![]);
    let (url, _stop) = serve(proxy).await;
    let http = preemptor::tls::http_client_builder()
        .build()
        .expect("http client");
    let patience = Duration::from_secs(20);

    let mut resp = http.get(format!("{url}/big")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let first = tokio::time::timeout(patience, resp.chunk())
        .await
        .expect("the first chunk arrives before the upstream has sent the rest")
        .unwrap()
        .unwrap();
    assert_eq!(first[0], b'a');
    response_gate.notify_one();
    let mut total = first.len();
    while let Some(chunk) = resp.chunk().await.unwrap() {
        total += chunk.len();
    }
    assert_eq!(total, FIRST + REST);

    // The other way: the upstream sees the first chunk before the client sends more.
    let (tx, rx) = mpsc::channel::<Bytes>(1);
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, std::io::Error>(b), rx))
    });
    let sending = tokio::spawn(
        http.post(format!("{url}/upload"))
            .body(reqwest::Body::wrap_stream(stream))
            .send(),
    );
    tx.send(Bytes::from(vec![1u8; FIRST])).await.unwrap();
    tokio::time::timeout(patience, request_gate.notified())
        .await
        .expect("the upstream receives the first chunk while the client is still sending");
    for _ in 0..8 {
        tx.send(Bytes::from(vec![2u8; 1 << 20])).await.unwrap();
    }
    drop(tx);
    let resp = sending.await.unwrap().unwrap();
    assert_eq!(resp.text().await.unwrap(), (FIRST + (8 << 20)).to_string());
    task.abort();
}

/// Log output captured from this test's thread.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

thread_local! {
    /// Where events on this thread go, while a test captures them.
    static CAPTURING: std::cell::RefCell<Option<Captured>> = const { std::cell::RefCell::new(None) };
}

/// Writes to this thread's capture, if any.
struct ToCapture;

impl std::io::Write for ToCapture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        CAPTURING.with(|c| {
            if let Some(c) = c.borrow().as_ref() {
                c.0.lock().unwrap().extend_from_slice(buf);
            }
        });
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Lets through the events of threads that capture. Asked on every event: an answer
/// cached per callsite would hold for every thread.
struct OnlyCapturing;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for OnlyCapturing {
    fn register_callsite(
        &self,
        _: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        tracing::subscriber::Interest::sometimes()
    }

    fn enabled(
        &self,
        _: &tracing::Metadata<'_>,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) -> bool {
        CAPTURING.with(|c| c.borrow().is_some())
    }
}

/// Ends this thread's capture.
struct CaptureGuard;

impl Drop for CaptureGuard {
    fn drop(&mut self) {
        CAPTURING.with(|c| c.borrow_mut().take());
    }
}

impl Captured {
    /// Captures every event at TRACE and below on this thread, `log` records included
    /// (reqwest logs through `log`), until the guard is dropped. One process-wide
    /// subscriber serves every test and keeps only the events of threads that capture:
    /// a subscriber set for one thread missed events while tests without one ran beside
    /// it (tracing's level hint and callsite interest are process-wide).
    fn install() -> (Captured, CaptureGuard) {
        use tracing_subscriber::layer::SubscriberExt;
        static GLOBAL: std::sync::Once = std::sync::Once::new();
        GLOBAL.call_once(|| {
            let _ = tracing_log::LogTracer::init();
            let subscriber = tracing_subscriber::fmt()
                .with_max_level(tracing::Level::TRACE)
                .with_writer(|| ToCapture)
                .finish()
                .with(OnlyCapturing);
            // Fails only if another test set one first; its tests then capture nothing,
            // which their assertions report.
            let _ = tracing::subscriber::set_global_default(subscriber);
        });
        let logs = Captured(Arc::default());
        CAPTURING.with(|c| *c.borrow_mut() = Some(Captured(logs.0.clone())));
        (logs, CaptureGuard)
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

// Single-threaded, so that the proxy's tasks log on this test's thread, which captures.
#[tokio::test]
async fn headers_pass_through_untouched_and_are_never_logged() {
    let (logs, _logging) = Captured::install();

    let echo = any(|req: Request| async move {
        let (parts, body) = req.into_parts();
        let body = axum::body::to_bytes(body, 1 << 20).await.unwrap();
        let headers: Vec<(String, String)> = parts
            .headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_string()))
            .collect();
        let echoed = serde_json::json!({
            "method": parts.method.as_str(),
            "path": parts.uri.path(),
            "query": parts.uri.query(),
            "headers": headers,
            "body": String::from_utf8_lossy(&body),
        });
        let mut resp = Response::new(Body::from(echoed.to_string()));
        let h = resp.headers_mut();
        if parts.uri.path().ends_with("/challenge") {
            // SPNEGO's first round: no credentials yet, so the RM asks for them.
            h.insert("www-authenticate", "Negotiate".parse().unwrap());
            h.append("www-authenticate", "Basic realm=\"rm\"".parse().unwrap());
            h.insert(
                "proxy-authenticate",
                "Basic realm=\"gateway\"".parse().unwrap(),
            );
        } else {
            // The mutual-authentication answer to the client's Negotiate token.
            h.insert(
                "www-authenticate",
                "Negotiate c2VydmVyLXRva2Vu".parse().unwrap(),
            );
        }
        h.insert(
            "set-cookie",
            "hadoop.auth=\"u=alice&p=alice@EXAMPLE.COM&t=kerberos&e=1&s=c2lnbmVk\"; Path=/; HttpOnly"
                .parse()
                .unwrap(),
        );
        h.insert("content-type", "application/json".parse().unwrap());
        if parts.uri.path().ends_with("/challenge") {
            *resp.status_mut() = StatusCode::UNAUTHORIZED;
        }
        resp
    });
    let (rm, task) = upstream(axum::Router::new().route("/echo/{*rest}", echo)).await;
    let (proxy, _) = proxy_for(client(&[&rm]), vec![]);
    let (url, _stop) = serve(proxy).await;
    let proxy_host = url.trim_start_matches("http://").to_string();

    let resp = preemptor::tls::http_client_builder()
        .build()
        .expect("http client")
        .put(format!(
            "{url}/echo/ws/v1/x?user.name=alice&a=%2Fb%20c&delegation=tok-123"
        ))
        .header("authorization", "Negotiate YIICsecret-spnego-token")
        .header("proxy-authorization", "Basic Z3c6Z2F0ZXdheS1wYXNzd29yZA==")
        .header(
            "cookie",
            "hadoop.auth=\"u=alice&t=kerberos&s=cookie-signature\"",
        )
        .header("x-custom", "kept")
        .header("connection", "x-hop")
        .header("x-hop", "hop-only")
        .body("payload")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let back: HeaderMap = resp.headers().clone();
    assert_eq!(back["www-authenticate"], "Negotiate c2VydmVyLXRva2Vu");
    assert!(
        back["set-cookie"]
            .to_str()
            .unwrap()
            .starts_with("hadoop.auth=\"u=alice&p=alice@EXAMPLE.COM")
    );
    let echoed: Value = resp.json().await.unwrap();
    assert_eq!(echoed["method"], "PUT");
    assert_eq!(echoed["path"], "/echo/ws/v1/x");
    assert_eq!(
        echoed["query"],
        "user.name=alice&a=%2Fb%20c&delegation=tok-123"
    );
    assert_eq!(echoed["body"], "payload");
    let sent: Vec<(String, String)> = serde_json::from_value(echoed["headers"].clone()).unwrap();
    let header = |name: &str| {
        sent.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(
        header("authorization"),
        Some("Negotiate YIICsecret-spnego-token")
    );
    assert_eq!(
        header("proxy-authorization"),
        Some("Basic Z3c6Z2F0ZXdheS1wYXNzd29yZA=="),
        "meant for a gateway in front of the RM, so relayed"
    );
    assert_eq!(
        header("cookie"),
        Some("hadoop.auth=\"u=alice&t=kerberos&s=cookie-signature\"")
    );
    assert_eq!(header("x-custom"), Some("kept"));
    assert_eq!(
        header("host"),
        Some(proxy_host.as_str()),
        "Host as the client sent it"
    );
    assert_eq!(header("x-forwarded-for"), Some("127.0.0.1"));
    assert_eq!(header("content-length"), Some("7"));
    assert_eq!(
        header("x-hop"),
        None,
        "a header named by Connection stays hop-by-hop"
    );

    // A SPNEGO challenge comes back as the RM sent it, every value in order.
    let resp = preemptor::tls::http_client_builder()
        .build()
        .expect("http client")
        .get(format!("{url}/echo/challenge"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    let challenges: Vec<&str> = resp
        .headers()
        .get_all("www-authenticate")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    assert_eq!(challenges, ["Negotiate", "Basic realm=\"rm\""]);
    assert_eq!(
        resp.headers()["proxy-authenticate"],
        "Basic realm=\"gateway\""
    );

    let logged = logs.text();
    assert!(
        logged.contains("proxied"),
        "the proxy logs its requests:\n{logged}"
    );
    for secret in [
        "secret-spnego-token",
        "Z3c6Z2F0ZXdheS1wYXNzd29yZA",
        "cookie-signature",
        "c2VydmVyLXRva2Vu",
        "c2lnbmVk",
        "tok-123",
        "hop-only",
    ] {
        assert!(!logged.contains(secret), "{secret} was logged:\n{logged}");
    }
    task.abort();
}

// Single-threaded, so that the proxy's tasks log on this test's thread, which captures.
#[tokio::test]
async fn proxy_errors_log_neither_credentials_nor_the_query() {
    let (logs, _logging) = Captured::install();
    // Says ACTIVE on `/info` and hangs up on every other request: a failure that is
    // not a refused connection, whose error names the URL.
    let hanging = BreakingRm::start(&["ACTIVE"]).await;
    let rm = hanging.url.clone();
    let (proxy, _) = proxy_for(client(&[&rm]), vec![]);
    let (url, _stop) = serve(proxy).await;

    let resp = preemptor::tls::http_client_builder()
        .build()
        .expect("http client")
        .get(format!(
            "{url}/ws/v1/cluster/apps?user.name=alice&delegation=dt-secret-42"
        ))
        .header("authorization", "Negotiate YIICerror-path-token")
        .header("proxy-authorization", "Basic ZXJyb3ItcGF0aA==")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 502);
    let body: Value = resp.json().await.unwrap();
    let message = body["RemoteException"]["message"].as_str().unwrap();
    assert!(message.contains(&rm), "the RM is named: {message}");
    assert!(!message.contains("dt-secret-42"), "{message}");

    let logged = logs.text();
    assert!(
        logged.contains("proxy error"),
        "the failure is logged:\n{logged}"
    );
    assert!(
        logged.contains("/ws/v1/cluster/apps"),
        "with its path:\n{logged}"
    );
    for secret in ["dt-secret-42", "error-path-token", "ZXJyb3ItcGF0aA"] {
        assert!(!logged.contains(secret), "{secret} was logged:\n{logged}");
    }
}

#[tokio::test]
async fn no_reachable_rm_is_a_502_remote_exception() {
    let (proxy, _) = proxy_for(client(&[&dead_address().await]), vec![]);
    let (url, _stop) = serve(proxy).await;
    let http = preemptor::tls::http_client_builder()
        .build()
        .expect("http client");
    let resp = http
        .get(format!("{url}/ws/v1/cluster/apps"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 502);
    assert_eq!(resp.headers()["content-type"], "application/json");
    let body: Value = resp.json().await.unwrap();
    let e = &body["RemoteException"];
    assert_eq!(e["exception"], "ConnectException");
    assert_eq!(e["javaClassName"], "java.net.ConnectException");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("cannot reach an active ResourceManager"),
        "{e}"
    );

    let resp = http
        .get(format!("{url}/ws/v1/cluster/apps"))
        .header("accept", "application/xml")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 502);
    let text = resp.text().await.unwrap();
    assert!(
        text.contains("<RemoteException><exception>ConnectException</exception>"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_follows_a_failover_to_the_new_active_rm() {
    let h = start_emulator(1).await;
    let rm = h.rm_url().to_string();
    let (was_active, c) = client_before_failover(standby_of(rm.clone()), &rm).await;
    let (proxy, _) = proxy_for(c.clone(), vec![]);
    let (url, _stop) = serve(proxy).await;

    let body: Value = preemptor::tls::http_client_builder()
        .build()
        .expect("http client")
        .get(format!("{url}/ws/v1/cluster/nodes"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["nodes"]["node"][0]["id"], h.nodes()[0].id.to_string());
    assert_eq!(c.current_rm().as_deref(), Some(rm.as_str()));
    let asked = was_active.seen.lock().unwrap().clone();
    assert!(
        asked.iter().any(|p| p.starts_with("/ws/v1/cluster/nodes")),
        "{asked:?}"
    );
    h.shutdown().await.unwrap();
}
