//! The emulator's optional SPNEGO mode: its RM web service then answers as Hadoop's
//! `AuthenticationFilter` with the Kerberos handler does, so that clients and Preemptor
//! can run secure end to end on one machine. A request needs a good `Negotiate` token
//! or a `hadoop.auth` cookie the emulator issued; anything else gets 401 with
//! `WWW-Authenticate: Negotiate` and Hadoop's JSON body.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE, COOKIE, SET_COOKIE, WWW_AUTHENTICATE};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::kerberos::{Accepted, SpnegoAcceptor};

/// The middleware guarding every route of the RM web service.
pub(crate) async fn guard(
    State(acceptor): State<Arc<SpnegoAcceptor>>,
    req: Request,
    next: Next,
) -> Response {
    let authorization = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let cookies: Vec<String> = req
        .headers()
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_string))
        .collect();
    let path = req.uri().path().to_string();
    let judged = {
        let acceptor = acceptor.clone();
        tokio::task::spawn_blocking(move || {
            let cookies: Vec<&str> = cookies.iter().map(String::as_str).collect();
            acceptor.accept(authorization.as_deref(), &cookies)
        })
        .await
    };
    match judged {
        Ok(Accepted::Yes {
            principal,
            cookie,
            reply,
        }) => {
            tracing::debug!(%principal, %path, "SPNEGO: authenticated");
            let mut resp = next.run(req).await;
            if let Some(c) = cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
                resp.headers_mut().append(SET_COOKIE, c);
            }
            if let Some(r) =
                reply.and_then(|r| HeaderValue::from_str(&format!("Negotiate {r}")).ok())
            {
                resp.headers_mut().append(WWW_AUTHENTICATE, r);
            }
            resp
        }
        Ok(Accepted::No(why)) => {
            if let Some(why) = why {
                tracing::warn!(%path, reason = %why, "SPNEGO: a token was refused");
            }
            unauthorized(&path)
        }
        Err(e) => {
            tracing::error!(error = %e, "SPNEGO: the GSSAPI task failed");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

/// What Hadoop's filter answers a request without good credentials.
fn unauthorized(path: &str) -> Response {
    let body = serde_json::json!({
        "servlet": "authentication",
        "message": "Authentication required",
        "url": path,
        "status": "401",
    });
    let mut resp = (StatusCode::UNAUTHORIZED, body.to_string()).into_response();
    let h = resp.headers_mut();
    h.insert(WWW_AUTHENTICATE, HeaderValue::from_static("Negotiate"));
    h.insert(
        SET_COOKIE,
        HeaderValue::from_static("hadoop.auth=; Path=/; HttpOnly"),
    );
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}
