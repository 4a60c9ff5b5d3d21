//! Fuzzing the agent API's request parsing through the real router (a dry-run enforcer,
//! driven with `oneshot`): arbitrary bytes, JSON shapes near the real bodies, odd paths,
//! methods, content types and tokens. Every answer must be 2xx or 4xx with a JSON body
//! (OpenMetrics text for `/metrics`, an event stream for `/v1/events`); bad input never
//! panics and never gets a 5xx.

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use proptest::prelude::*;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::api::ActionRequest;
use super::enforcer::{Enforcer, EnforcerSettings, Runtime};
use super::metrics::Metrics;
use super::server::{AppState, router};

const TOKEN: &str = "fuzz-token";
/// Small, so that oversized bodies (413) are generated too.
const MAX_BODY: usize = 2048;

fn app() -> Router {
    let enforcer = Enforcer::new(
        Runtime::DryRun,
        EnforcerSettings::default(),
        None,
        Arc::new(Metrics::new()),
        Instant::now(),
    );
    router(
        Arc::new(AppState {
            enforcer: Arc::new(enforcer),
            token: TOKEN.as_bytes().to_vec(),
            shutdown: CancellationToken::new(),
        }),
        MAX_BODY,
    )
}

#[derive(Clone)]
struct Call {
    method: Method,
    path: String,
    content_type: Option<String>,
    authorization: Option<String>,
    body: Vec<u8>,
}

// The body as text, so that a shrunk failure can be read.
impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("method", &self.method)
            .field("path", &self.path)
            .field("content_type", &self.content_type)
            .field("authorization", &self.authorization)
            .field("body", &String::from_utf8_lossy(&self.body))
            .finish()
    }
}

const CONTAINER: &str = "container_1700000000000_0001_01_000002";

fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<u64>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        prop::sample::select(vec![
            0.0,
            -1.0,
            1.5,
            64.0,
            1024.0,
            4_294_967_295.0,
            4_294_967_296.0,
            1.8446744073709552e19,
            1e300,
            -0.0,
        ])
        .prop_map(Value::from),
        prop::sample::select(vec![0u64, 1, 10, 63, 64, 1024, u32::MAX as u64, u64::MAX])
            .prop_map(Value::from),
    ]
}

fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "suspend",
            "shrink",
            "resume",
            "kill",
            "SUSPEND",
            "",
            CONTAINER,
            "container_1700000000000_0001_01_000001",
            "container_e17_1700000000000_0001_01_000002",
            "container_1700000000000_0001_01",
            "nginx",
            "c1",
            "../../etc/passwd",
        ])
        .prop_map(str::to_string),
        ".{0,40}",
        "[a-z0-9_.-]{0,130}",
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "container",
            "action",
            "allocated",
            "target",
            "memoryMb",
            "vcores",
            "cpuMillis",
            "controller",
            "timeoutMs",
        ])
        .prop_map(str::to_string),
        "[a-zA-Z]{0,10}",
    ]
}

/// Any JSON, with keys and values biased towards the API's own.
fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number(),
        word().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(key(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// Mostly plausible amounts, sometimes any number.
fn amount(max: u64) -> impl Strategy<Value = Value> {
    prop_oneof![3 => (0..=max).prop_map(Value::from), 1 => number()]
}

fn resource(first: &'static str, second: &'static str, max: u64) -> impl Strategy<Value = Value> {
    (amount(1 << 20), amount(max), prop::bool::weighted(0.1)).prop_map(
        move |(a, b, drop_second)| {
            let mut m = Map::new();
            m.insert(first.into(), a);
            if !drop_second {
                m.insert(second.into(), b);
            }
            Value::Object(m)
        },
    )
}

/// Action requests: mostly the right shape with real actions and container ids, so
/// that requests get past parsing; odd values, missing or extra fields too.
fn action() -> impl Strategy<Value = Value> {
    let container = prop_oneof![
        3 => (1..4u32, 1..40u32).prop_map(|(app, n)| {
            format!("container_1700000000000_{app:04}_01_{n:06}")
        }),
        1 => word(),
    ];
    let kind = prop_oneof![
        3 => prop::sample::select(vec!["suspend", "shrink", "resume", "kill"])
            .prop_map(str::to_string),
        1 => word(),
    ];
    // A target within the allocation and above the floor, as the controller sends.
    let coherent = (64..=65_536u64, 1..=16u64)
        .prop_flat_map(|(mem, vcores)| (Just((mem, vcores)), 64..=mem, 10..=vcores * 1000))
        .prop_map(|((mem, vcores), tmem, tcpu)| {
            (
                serde_json::json!({"memoryMb": mem, "vcores": vcores}),
                serde_json::json!({"memoryMb": tmem, "cpuMillis": tcpu}),
            )
        });
    let amounts = prop_oneof![
        2 => coherent,
        1 => (
            resource("memoryMb", "vcores", 64),
            resource("memoryMb", "cpuMillis", 64_000)
        ),
    ];
    (
        container,
        kind,
        amounts,
        prop::option::weighted(0.2, (key(), json())),
    )
        .prop_map(|(container, kind, (allocated, target), extra)| {
            (container, kind, allocated, target, extra)
        })
        .prop_map(|(container, action, allocated, target, extra)| {
            let mut m = Map::new();
            m.insert("container".into(), Value::String(container));
            m.insert("action".into(), Value::String(action));
            m.insert("allocated".into(), allocated);
            m.insert("target".into(), target);
            if let Some((k, v)) = extra {
                m.insert(k, v);
            }
            Value::Object(m)
        })
}

fn lease() -> impl Strategy<Value = Value> {
    (word(), prop::option::of(number())).prop_map(|(controller, timeout)| {
        let mut m = Map::new();
        m.insert("controller".into(), Value::String(controller));
        if let Some(t) = timeout {
            m.insert("timeoutMs".into(), t);
        }
        Value::Object(m)
    })
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => action().prop_map(|v| v.to_string().into_bytes()),
        2 => lease().prop_map(|v| v.to_string().into_bytes()),
        2 => json().prop_map(|v| v.to_string().into_bytes()),
        2 => prop::collection::vec(any::<u8>(), 0..256),
        1 => (action(), any::<prop::sample::Index>()).prop_map(|(v, at)| {
            // Truncated JSON.
            let s = v.to_string().into_bytes();
            s[..at.index(s.len() + 1)].to_vec()
        }),
        1 => (1..4usize).prop_map(|k| {
            format!("{{\"container\":\"{}\",\"action\":\"kill\"}}", "x".repeat(MAX_BODY * k))
                .into_bytes()
        }),
    ]
}

/// A percent-encoded path segment from arbitrary text (invalid UTF-8 escapes included).
fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        word().prop_map(|w| {
            w.bytes()
                .map(|b| {
                    if b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.') {
                        char::from(b).to_string()
                    } else {
                        format!("%{b:02X}")
                    }
                })
                .collect::<String>()
        }),
        prop::sample::select(vec!["%FF", "%C3%28", "%00", "%2F", "..", "%", "%zz"])
            .prop_map(str::to_string),
    ]
}

fn path() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => Just("/v1/actions".to_string()),
        2 => Just("/v1/lease".to_string()),
        1 => Just("/v1/containers".to_string()),
        2 => segment().prop_map(|s| format!("/v1/containers/{s}")),
        1 => Just("/v1/events".to_string()),
        1 => Just("/healthz".to_string()),
        1 => Just("/metrics".to_string()),
        1 => (segment(), segment()).prop_map(|(a, b)| format!("/v1/{a}/{b}")),
        1 => segment().prop_map(|s| format!("/{s}")),
    ]
}

fn call() -> impl Strategy<Value = Call> {
    let method = prop::sample::select(vec![
        Method::GET,
        Method::POST,
        Method::PUT,
        Method::DELETE,
        Method::PATCH,
        Method::HEAD,
        Method::OPTIONS,
    ]);
    let post_heavy = prop_oneof![3 => Just(Method::POST), 2 => method];
    let content_type = prop_oneof![
        6 => Just(Some("application/json".to_string())),
        1 => Just(Some("application/json; charset=utf-8".to_string())),
        1 => Just(None),
        1 => Just(Some("text/plain".to_string())),
        1 => "[ -~]{0,30}".prop_map(Some),
    ];
    let authorization = prop_oneof![
        8 => Just(Some(format!("Bearer {TOKEN}"))),
        1 => Just(None),
        1 => "[ -~]{0,40}".prop_map(Some),
    ];
    (post_heavy, path(), content_type, authorization, body()).prop_map(
        |(method, path, content_type, authorization, body)| Call {
            method,
            path,
            content_type,
            authorization,
            body,
        },
    )
}

/// Sends `c` and checks the answer's status and shape.
async fn check(app: &Router, c: &Call) -> Result<(), TestCaseError> {
    let mut b = Request::builder().method(c.method.clone()).uri(&c.path);
    if let Some(t) = &c.content_type {
        b = b.header(header::CONTENT_TYPE, t);
    }
    if let Some(a) = &c.authorization {
        b = b.header(header::AUTHORIZATION, a);
    }
    let Ok(req) = b.body(Body::from(c.body.clone())) else {
        // The HTTP layer refuses such a request before the router sees it.
        return Ok(());
    };
    let resp = app
        .clone()
        .oneshot(req)
        .await
        .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
    let status = resp.status();
    prop_assert!(
        status.is_success() || status.is_client_error(),
        "{} {} -> {status}",
        c.method,
        c.path
    );
    if status == StatusCode::METHOD_NOT_ALLOWED {
        prop_assert!(resp.headers().contains_key(header::ALLOW), "{c:?}");
    }
    let ctype = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    if ctype.starts_with("text/event-stream") {
        // A stream that never ends: its status and type are the answer.
        prop_assert_eq!(status, StatusCode::OK);
        return Ok(());
    }
    let bytes = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| TestCaseError::fail(format!("{e:?}")))?
        .to_bytes();
    if c.method == Method::HEAD {
        return Ok(());
    }
    if status.is_success() && ctype.starts_with("application/openmetrics-text") {
        prop_assert_eq!(c.path.as_str(), "/metrics");
        return Ok(());
    }
    prop_assert!(
        ctype.starts_with("application/json"),
        "{} {} -> {status} with content-type {ctype:?}: {:?}",
        c.method,
        c.path,
        String::from_utf8_lossy(&bytes)
    );
    let v: Value = serde_json::from_slice(&bytes).map_err(|e| {
        TestCaseError::fail(format!(
            "{} {} -> {status}: not JSON ({e}): {:?}",
            c.method,
            c.path,
            String::from_utf8_lossy(&bytes)
        ))
    })?;
    if !status.is_success() {
        prop_assert!(
            v["error"].is_string() && v["reason"].is_string(),
            "{status}: {v}"
        );
    }
    Ok(())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Sequences of requests on one agent, so that actions also meet a held lease and
    /// containers the agent already changed.
    #[test]
    fn any_request_gets_a_2xx_or_4xx_json_answer(
        lease_first in any::<bool>(),
        calls in prop::collection::vec(call(), 1..8),
    ) {
        let rt = runtime();
        rt.block_on(async {
            let app = app();
            if lease_first {
                let renew = Call {
                    method: Method::POST,
                    path: "/v1/lease".into(),
                    content_type: Some("application/json".into()),
                    authorization: Some(format!("Bearer {TOKEN}")),
                    body: br#"{"controller":"fuzz","timeoutMs":60000}"#.to_vec(),
                };
                check(&app, &renew).await?;
            }
            for c in &calls {
                check(&app, c).await?;
            }
            Ok::<(), TestCaseError>(())
        })?;
    }

    /// The action request parser alone: any bytes are an error or a request that
    /// survives a round trip unchanged, never a panic.
    #[test]
    fn the_action_parser_takes_any_bytes(
        bytes in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..512),
            action().prop_map(|v| v.to_string().into_bytes()),
        ],
    ) {
        if let Ok(req) = serde_json::from_slice::<ActionRequest>(&bytes) {
            let again = serde_json::to_vec(&req)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            let back: ActionRequest = serde_json::from_slice(&again)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(back, req);
        }
    }
}
