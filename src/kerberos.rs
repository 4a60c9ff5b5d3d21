//! SPNEGO (HTTP `Negotiate`, RFC 4559) to Hadoop's Kerberized web endpoints
//! (`hadoop.http.authentication.type=kerberos`), as a Kerberos client from a keytab.
//!
//! Kerberos itself is the system's GSSAPI (MIT krb5's `libgssapi_krb5`), through the
//! `libgssapi` crate. Credentials come from the keytab through MIT's credential-store
//! extension (`gss_acquire_cred_from` with `client_keytab` and a private `MEMORY:` ccache),
//! so that nothing process-wide (`KRB5CCNAME`, `KRB5_CLIENT_KTNAME`) is set: MIT gets the
//! initial ticket from the keytab when it is needed and a new one once half its life is
//! gone. MIT refreshes only when a credential is acquired, not while one is held, so the
//! credential is acquired anew (from the ccache, cheap) for every token.
//! `libgssapi` wraps every other call; this one it does not, hence the one `unsafe` block.
//!
//! Hadoop answers a good token with its signed `hadoop.auth` cookie; it is sent instead of
//! a new token until shortly before the expiry it carries. A 401 drops the cookie and is
//! retried once with a fresh token.

use std::collections::HashMap;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use libgssapi::context::{ClientCtx, CtxFlags};
use libgssapi::credential::Cred;
use libgssapi::name::Name;
use libgssapi::oid::{GSS_MECH_SPNEGO, GSS_NT_HOSTBASED_SERVICE};
use reqwest::header::{
    AUTHORIZATION, COOKIE, HeaderMap, HeaderValue, SET_COOKIE, WWW_AUTHENTICATE,
};
use reqwest::{RequestBuilder, Response, StatusCode, Url};

use crate::config::secret::{SecretFileError, read_secret_file};
use crate::config::settings::KerberosSettings;
use crate::sync::lock;

/// A keytab holds a few keys per principal; a larger file is not one.
const MAX_KEYTAB_BYTES: u64 = 1 << 20;
/// Cookies an acceptor honours at once, at most.
const MAX_ISSUED_COOKIES: usize = 10_000;
/// Hadoop's authentication cookie.
const COOKIE_NAME: &str = "hadoop.auth";
/// A cookie this close to its expiry is not sent: a request in flight when it expires
/// would be refused.
const COOKIE_SLACK: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum KerberosError {
    #[error(transparent)]
    Keytab(#[from] SecretFileError),
    #[error("Kerberos principal {principal:?}: {reason}")]
    Principal { principal: String, reason: String },
    #[error(
        "Kerberos: no ticket for HTTP@{host} as {principal} with keytab {keytab}: {reason}; `kinit -kt {keytab} {principal}` (with the same KRB5_CONFIG) shows the same, `klist -kt {keytab}` which principals the keytab holds"
    )]
    Ticket {
        host: String,
        principal: String,
        keytab: PathBuf,
        reason: String,
    },
    #[error("Kerberos: the GSSAPI task failed: {0}")]
    Task(String),
}

/// The `Authorization: Negotiate` and `hadoop.auth` side of requests to Hadoop's web
/// endpoints, for one principal. Cheap to clone; clones share the cookies.
#[derive(Clone)]
pub struct Spnego {
    inner: Arc<Inner>,
}

struct Inner {
    principal: String,
    keytab: PathBuf,
    /// `MEMORY:` ccache private to this client.
    ccache: CString,
    /// Held while acquiring, so that one refresh from the keytab serves all callers.
    acquiring: Mutex<()>,
    /// Origin (`https://host:port`) -> `hadoop.auth=...` and when it expires.
    cookies: Mutex<HashMap<String, (String, Option<SystemTime>)>>,
}

impl std::fmt::Debug for Spnego {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spnego")
            .field("principal", &self.inner.principal)
            .field("keytab", &self.inner.keytab)
            .finish_non_exhaustive()
    }
}

impl Spnego {
    /// Checks the keytab (a private regular file, `chmod 600`) and the principal's
    /// syntax, and puts this host's name in place of `_HOST` as Hadoop does
    /// ([`expand_host`]). Nothing is asked of the KDC yet.
    pub fn new(settings: &KerberosSettings) -> Result<Spnego, KerberosError> {
        read_secret_file(&settings.keytab, "Kerberos keytab", MAX_KEYTAB_BYTES)?;
        let principal = settings.principal.trim();
        let bad = |reason: &str| KerberosError::Principal {
            principal: settings.principal.clone(),
            reason: reason.into(),
        };
        if principal.is_empty() || principal.contains(char::is_whitespace) {
            return Err(bad("expected name[/instance]@REALM with no spaces"));
        }
        if principal.contains('\0') {
            return Err(bad("contains a NUL byte"));
        }
        let principal = expand_host(principal, local_host_name)
            .map_err(|e| bad(&format!("`_HOST` needs this host's name: {e}")))?;
        let keytab = settings.keytab.to_str().ok_or_else(|| {
            KerberosError::Keytab(SecretFileError::Read {
                what: "Kerberos keytab",
                path: settings.keytab.clone(),
                error: std::io::Error::other("the path is not UTF-8"),
            })
        })?;
        if keytab.contains('\0') {
            return Err(bad("the keytab path contains a NUL byte"));
        }
        // Unique per client, so that two clients' tickets never mix.
        let mut id = [0u8; 8];
        getrandom::fill(&mut id).map_err(|e| bad(&format!("no random ccache name: {e}")))?;
        let ccache = CString::new(format!("MEMORY:preemptor-{}", u64::from_le_bytes(id)))
            .map_err(|_| bad("unusable ccache name"))?;
        Ok(Spnego {
            inner: Arc::new(Inner {
                principal,
                keytab: settings.keytab.clone(),
                ccache,
                acquiring: Mutex::new(()),
                cookies: Mutex::new(HashMap::new()),
            }),
        })
    }

    pub fn principal(&self) -> &str {
        &self.inner.principal
    }

    /// Sends the request `build` makes, authenticated: with the origin's `hadoop.auth`
    /// cookie when one is fresh, else with a new SPNEGO token. A 401 is retried once with
    /// a fresh token. The outer error is Kerberos', the inner one the transport's.
    pub async fn send(
        &self,
        url: &Url,
        build: impl Fn() -> RequestBuilder,
    ) -> Result<Result<Response, reqwest::Error>, KerberosError> {
        let origin = origin(url);
        let mut fresh = false;
        loop {
            let mut req = build();
            match self.cookie(&origin).filter(|_| !fresh) {
                Some(cookie) => req = req.header(COOKIE, cookie),
                None => {
                    let token = self.token(url).await?;
                    req = req.header(AUTHORIZATION, token);
                }
            }
            let resp = match req.send().await {
                Ok(r) => r,
                Err(e) => return Ok(Err(e)),
            };
            if resp.status() == StatusCode::UNAUTHORIZED && !fresh {
                // An expired or revoked cookie, or a token the server did not take.
                self.forget(&origin);
                fresh = true;
                continue;
            }
            self.remember(&origin, resp.headers());
            return Ok(Ok(resp));
        }
    }

    /// `Negotiate <token>` for the service `HTTP@<url's host>`.
    async fn token(&self, url: &Url) -> Result<HeaderValue, KerberosError> {
        let host = url.host_str().unwrap_or_default().trim_matches(['[', ']']);
        let host = host.to_string();
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.token_blocking(&host))
            .await
            .map_err(|e| KerberosError::Task(e.to_string()))?
    }

    fn token_blocking(&self, host: &str) -> Result<HeaderValue, KerberosError> {
        let failed = |reason: String| KerberosError::Ticket {
            host: host.to_string(),
            principal: self.inner.principal.clone(),
            keytab: self.inner.keytab.clone(),
            reason,
        };
        let cred = {
            let _one_at_a_time = lock(&self.inner.acquiring);
            acquire_from_keytab(
                &self.inner.principal,
                &self.inner.keytab,
                &self.inner.ccache,
            )
            .map_err(&failed)?
        };
        let target = Name::new(
            format!("HTTP@{host}").as_bytes(),
            Some(&GSS_NT_HOSTBASED_SERVICE),
        )
        .map_err(|e| failed(e.to_string()))?;
        let mut ctx = ClientCtx::new(
            Some(cred),
            target,
            CtxFlags::empty(),
            Some(&GSS_MECH_SPNEGO),
        );
        let token = ctx
            .step(None, None)
            .map_err(|e| failed(e.to_string()))?
            .ok_or_else(|| failed("GSSAPI gave no initial token".into()))?;
        let value = format!(
            "Negotiate {}",
            base64::engine::general_purpose::STANDARD.encode(&*token)
        );
        HeaderValue::from_str(&value).map_err(|e| failed(e.to_string()))
    }

    fn cookie(&self, origin: &str) -> Option<String> {
        let mut cookies = lock(&self.inner.cookies);
        let (value, expires) = cookies.get(origin)?;
        if expires.is_some_and(|e| SystemTime::now() + COOKIE_SLACK >= e) {
            cookies.remove(origin);
            return None;
        }
        Some(value.clone())
    }

    fn forget(&self, origin: &str) {
        lock(&self.inner.cookies).remove(origin);
    }

    fn remember(&self, origin: &str, headers: &HeaderMap) {
        for value in headers.get_all(SET_COOKIE) {
            let Ok(value) = value.to_str() else { continue };
            if let Some(cookie) = parse_auth_cookie(value) {
                let mut cookies = lock(&self.inner.cookies);
                match cookie {
                    Some((pair, expires)) => cookies.insert(origin.to_string(), (pair, expires)),
                    None => cookies.remove(origin),
                };
            }
        }
    }
}

/// Hadoop's `_HOST` (`SecurityUtil.getServerPrincipal`): in `name/_HOST@REALM`, `_HOST`
/// becomes `host()` in lower case; any other principal is kept as written.
pub fn expand_host(
    principal: &str,
    host: impl FnOnce() -> std::io::Result<String>,
) -> std::io::Result<String> {
    let parts: Vec<&str> = principal.split(['/', '@']).collect();
    match parts[..] {
        [name, "_HOST", realm] => Ok(format!("{name}/{}@{realm}", host()?.to_lowercase())),
        _ => Ok(principal.to_string()),
    }
}

/// This host's canonical name, as `hostname -f` prints it: the first name of its
/// `/etc/hosts` line, or DNS's canonical name; the bare host name when neither has one.
pub fn local_host_name() -> std::io::Result<String> {
    let name = dns_lookup::get_hostname()?;
    let hints = dns_lookup::AddrInfoHints {
        flags: libc::AI_CANONNAME,
        ..dns_lookup::AddrInfoHints::default()
    };
    let canonical = dns_lookup::getaddrinfo(Some(&name), None, Some(hints))
        .ok()
        .and_then(|mut addrs| addrs.find_map(|a| a.ok()?.canonname))
        .filter(|c| !c.is_empty());
    Ok(canonical.unwrap_or(name))
}

/// Whether `headers` (of a 401) ask for SPNEGO.
pub fn asks_for_negotiate(headers: &HeaderMap) -> bool {
    headers.get_all(WWW_AUTHENTICATE).iter().any(|v| {
        v.to_str()
            .is_ok_and(|s| s.trim_start().to_ascii_lowercase().starts_with("negotiate"))
    })
}

/// Sends the request `build` makes, through `spnego` when one is configured and as it
/// is otherwise. Errors as [`Spnego::send`].
pub async fn send_with(
    spnego: Option<&Spnego>,
    url: &Url,
    build: impl Fn() -> RequestBuilder,
) -> Result<Result<Response, reqwest::Error>, KerberosError> {
    match spnego {
        Some(spnego) => spnego.send(url, build).await,
        None => Ok(build().send().await),
    }
}

fn origin(url: &Url) -> String {
    url.origin().ascii_serialization()
}

/// A `Set-Cookie` of `hadoop.auth`: `Some(Some((cookie pair, expiry)))` to keep,
/// `Some(None)` when the server clears it (an empty value), `None` for other cookies.
/// The expiry is the token's `e=<ms since the epoch>`.
fn parse_auth_cookie(set_cookie: &str) -> Option<Option<(String, Option<SystemTime>)>> {
    let pair = set_cookie.split(';').next()?.trim();
    let (name, value) = pair.split_once('=')?;
    if name.trim() != COOKIE_NAME {
        return None;
    }
    let value = value.trim();
    let bare = value.trim_matches('"');
    if bare.is_empty() {
        return Some(None);
    }
    let expires = bare
        .split('&')
        .find_map(|kv| kv.strip_prefix("e="))
        .and_then(|ms| ms.parse::<u64>().ok())
        .map(|ms| UNIX_EPOCH + Duration::from_millis(ms));
    Some(Some((format!("{COOKIE_NAME}={value}"), expires)))
}

/// Initiator credentials for `principal` from `keytab`, cached in `ccache`.
fn acquire_from_keytab(principal: &str, keytab: &Path, ccache: &CString) -> Result<Cred, String> {
    let keytab = CString::new(keytab.to_string_lossy().as_bytes()).map_err(|e| e.to_string())?;
    acquire_from_store(
        Some(principal),
        libgssapi_sys::GSS_C_INITIATE,
        &[(c"client_keytab", &keytab), (c"ccache", ccache)],
    )
}

/// Credentials from MIT's credential store (`gss_acquire_cred_from`): for `name` (or
/// any name the store holds), to initiate or to accept.
fn acquire_from_store(
    name: Option<&str>,
    usage: u32,
    store: &[(&std::ffi::CStr, &CString)],
) -> Result<Cred, String> {
    use libgssapi_sys as sys;
    use std::ptr;

    let mut elements: Vec<sys::gss_key_value_element_struct> = store
        .iter()
        .map(|(k, v)| sys::gss_key_value_element_struct {
            key: k.as_ptr(),
            value: v.as_ptr(),
        })
        .collect();
    let store = sys::gss_key_value_set_struct {
        count: elements.len() as u32,
        elements: elements.as_mut_ptr(),
    };
    let error = |major: u32, minor: u32| {
        libgssapi::error::Error {
            major: libgssapi::error::MajorFlags::from_bits_retain(major),
            minor,
        }
        .to_string()
    };
    // SAFETY: every pointer passed lives until the calls return (`elements`, `store`,
    // `name_buf` and the strings they point into); GSSAPI copies what it keeps. The name
    // is released here, the credential by `Cred`'s Drop.
    unsafe {
        let mut minor = 0;
        let mut gss_name: sys::gss_name_t = ptr::null_mut();
        if let Some(name) = name {
            let mut name_buf = sys::gss_buffer_desc_struct {
                length: name.len(),
                value: name.as_ptr() as *mut std::ffi::c_void,
            };
            let major = sys::gss_import_name(
                &mut minor,
                &mut name_buf,
                sys::GSS_C_NT_USER_NAME,
                &mut gss_name,
            );
            if major != sys::GSS_S_COMPLETE {
                return Err(format!("the principal: {}", error(major, minor)));
            }
        }
        let mut cred: sys::gss_cred_id_t = ptr::null_mut();
        let major = sys::gss_acquire_cred_from(
            &mut minor,
            gss_name,
            sys::_GSS_C_INDEFINITE,
            ptr::null_mut(),
            usage as sys::gss_cred_usage_t,
            &store,
            &mut cred,
            ptr::null_mut(),
            ptr::null_mut(),
        );
        if !gss_name.is_null() {
            let mut ignored = 0;
            sys::gss_release_name(&mut ignored, &mut gss_name);
        }
        if major != sys::GSS_S_COMPLETE {
            return Err(error(major, minor));
        }
        Ok(Cred::from(cred))
    }
}

/// The server side of SPNEGO, for the emulator's SPNEGO mode: accepts tokens for any
/// service principal in a keytab, and answers a good one with a `hadoop.auth` cookie in
/// Hadoop's format that it honours until it expires.
pub struct SpnegoAcceptor {
    keytab: PathBuf,
    cred: Cred,
    cookie_life: Duration,
    /// Issued cookie value -> its principal and expiry.
    issued: Mutex<HashMap<String, (String, SystemTime)>>,
}

impl std::fmt::Debug for SpnegoAcceptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpnegoAcceptor")
            .field("keytab", &self.keytab)
            .finish_non_exhaustive()
    }
}

/// What [`SpnegoAcceptor::accept`] concluded.
#[derive(Debug)]
pub enum Accepted {
    /// The caller is `principal`; `cookie` is a `Set-Cookie` value to return when a
    /// token was accepted, `reply` GSSAPI's answer token (`Negotiate <reply>`).
    Yes {
        principal: String,
        cookie: Option<String>,
        reply: Option<String>,
    },
    /// No credentials, or ones that do not verify (the reason, for the log).
    No(Option<String>),
}

impl SpnegoAcceptor {
    /// An acceptor for the keys in `keytab` (chmod 600, as every secret file).
    pub fn new(keytab: &Path, cookie_life: Duration) -> Result<SpnegoAcceptor, KerberosError> {
        read_secret_file(keytab, "Kerberos keytab", MAX_KEYTAB_BYTES)?;
        let path = CString::new(keytab.to_string_lossy().as_bytes()).map_err(|_| {
            KerberosError::Ticket {
                host: "(acceptor)".into(),
                principal: "any service principal".into(),
                keytab: keytab.to_path_buf(),
                reason: "the path contains a NUL byte".into(),
            }
        })?;
        let cred = acquire_from_store(None, libgssapi_sys::GSS_C_ACCEPT, &[(c"keytab", &path)])
            .map_err(|reason| KerberosError::Ticket {
                host: "(acceptor)".into(),
                principal: "any service principal".into(),
                keytab: keytab.to_path_buf(),
                reason,
            })?;
        Ok(SpnegoAcceptor {
            keytab: keytab.to_path_buf(),
            cred,
            cookie_life,
            issued: Mutex::new(HashMap::new()),
        })
    }

    /// Judges a request by its `Authorization` and `Cookie` headers. Blocking (GSSAPI
    /// may read the keytab): call from a blocking thread.
    pub fn accept(&self, authorization: Option<&str>, cookies: &[&str]) -> Accepted {
        let now = SystemTime::now();
        {
            let mut issued = lock(&self.issued);
            issued.retain(|_, (_, expires)| *expires > now);
            for c in cookies.iter().flat_map(|h| h.split(';')) {
                if let Some(v) = c.trim().strip_prefix("hadoop.auth=")
                    && let Some((principal, _)) = issued.get(v)
                {
                    return Accepted::Yes {
                        principal: principal.clone(),
                        cookie: None,
                        reply: None,
                    };
                }
            }
        }
        let Some(token) = authorization
            .and_then(|a| a.trim().strip_prefix("Negotiate "))
            .map(str::trim)
        else {
            return Accepted::No(None);
        };
        let token = match base64::engine::general_purpose::STANDARD.decode(token) {
            Ok(t) => t,
            Err(e) => return Accepted::No(Some(format!("the token is not base64: {e}"))),
        };
        use libgssapi::context::{SecurityContext, ServerCtx};
        let mut ctx = ServerCtx::new(Some(self.cred.clone()));
        let reply = match ctx.step(&token) {
            Ok(reply) => reply,
            Err(e) => return Accepted::No(Some(e.to_string())),
        };
        if !ctx.is_complete() {
            return Accepted::No(Some("the token needs more than one round".into()));
        }
        let principal = match ctx.source_name() {
            Ok(n) => n.to_string(),
            Err(e) => return Accepted::No(Some(e.to_string())),
        };
        let mut secret = [0u8; 16];
        if let Err(e) = getrandom::fill(&mut secret) {
            return Accepted::No(Some(format!("no random cookie: {e}")));
        }
        let expires = now + self.cookie_life;
        let ms = expires
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let short = principal.split(['/', '@']).next().unwrap_or_default();
        let signature: String = secret.iter().map(|b| format!("{b:02x}")).collect();
        let value = format!("\"u={short}&p={principal}&t=kerberos&e={ms}&s={signature}\"");
        {
            let mut issued = lock(&self.issued);
            // Clients that never send the cookie back get one per request: keep the
            // newest, not all of them for the whole validity.
            if issued.len() >= MAX_ISSUED_COOKIES
                && let Some(oldest) = issued
                    .iter()
                    .min_by_key(|(_, (_, e))| *e)
                    .map(|(k, _)| k.clone())
            {
                issued.remove(&oldest);
            }
            issued.insert(value.clone(), (principal.clone(), expires));
        }
        Accepted::Yes {
            principal,
            cookie: Some(format!("hadoop.auth={value}; Path=/; HttpOnly")),
            reply: reply.map(|r| base64::engine::general_purpose::STANDARD.encode(&*r)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_auth_cookie_is_kept_with_its_expiry_and_cleared_when_emptied() {
        let set = r#"hadoop.auth="u=preemptor&p=preemptor@EXAMPLE.COM&t=kerberos&e=1700000036000&s=abc="; Path=/; HttpOnly"#;
        let (pair, expires) = parse_auth_cookie(set).unwrap().unwrap();
        assert_eq!(
            pair,
            r#"hadoop.auth="u=preemptor&p=preemptor@EXAMPLE.COM&t=kerberos&e=1700000036000&s=abc=""#
        );
        assert_eq!(
            expires,
            Some(UNIX_EPOCH + Duration::from_millis(1_700_000_036_000))
        );
        assert_eq!(parse_auth_cookie("hadoop.auth=; Path=/"), Some(None));
        assert_eq!(parse_auth_cookie(r#"hadoop.auth="""#), Some(None));
        assert_eq!(parse_auth_cookie("JSESSIONID=x; Path=/"), None);
        assert_eq!(parse_auth_cookie("garbage"), None);
    }

    #[test]
    fn a_cookie_near_its_expiry_is_not_sent() {
        let dir = tempfile::tempdir().unwrap();
        let keytab = dir.path().join("k.keytab");
        std::fs::write(&keytab, b"\x05\x02").unwrap();
        std::fs::set_permissions(&keytab, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        let s = Spnego::new(&KerberosSettings {
            principal: "preemptor@EXAMPLE.COM".into(),
            keytab,
        })
        .unwrap();
        let now_ms = |d: i64| {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_millis() as i64;
            now + d
        };
        let mut headers = HeaderMap::new();
        let cookie = format!("hadoop.auth=\"u=p&e={}&s=x\"; Path=/", now_ms(3_600_000));
        headers.append(SET_COOKIE, HeaderValue::from_str(&cookie).unwrap());
        s.remember("https://rm:8090", &headers);
        assert!(s.cookie("https://rm:8090").is_some());
        assert!(s.cookie("https://other:8090").is_none());
        let mut headers = HeaderMap::new();
        let cookie = format!("hadoop.auth=\"u=p&e={}&s=x\"; Path=/", now_ms(10_000));
        headers.append(SET_COOKIE, HeaderValue::from_str(&cookie).unwrap());
        s.remember("https://rm:8090", &headers);
        assert!(s.cookie("https://rm:8090").is_none(), "30 s of slack");
    }

    #[test]
    fn a_keytab_others_can_read_or_a_bad_principal_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let keytab = dir.path().join("k.keytab");
        std::fs::write(&keytab, b"\x05\x02").unwrap();
        std::fs::set_permissions(&keytab, std::fs::Permissions::from_mode(0o644)).unwrap();
        let settings = |principal: &str| KerberosSettings {
            principal: principal.into(),
            keytab: keytab.clone(),
        };
        let e = Spnego::new(&settings("preemptor@EXAMPLE.COM")).unwrap_err();
        assert!(e.to_string().contains("chmod 600"), "{e}");
        std::fs::set_permissions(&keytab, std::fs::Permissions::from_mode(0o600)).unwrap();
        for bad in ["", "pre emptor@EXAMPLE.COM"] {
            let e = Spnego::new(&settings(bad)).unwrap_err();
            assert!(matches!(e, KerberosError::Principal { .. }), "{bad:?}: {e}");
        }
        assert!(Spnego::new(&settings("preemptor/host@EXAMPLE.COM")).is_ok());
        let s = Spnego::new(&settings("preemptor/_HOST@EXAMPLE.COM")).unwrap();
        let host = local_host_name().unwrap().to_lowercase();
        assert_eq!(s.principal(), format!("preemptor/{host}@EXAMPLE.COM"));
    }

    #[test]
    fn only_a_host_part_of_host_is_replaced_in_lower_case() {
        let host = || Ok("NM3.Example.COM".to_string());
        let expanded = |p: &str| expand_host(p, host).unwrap();
        assert_eq!(
            expanded("nm/_HOST@EXAMPLE.COM"),
            "nm/nm3.example.com@EXAMPLE.COM"
        );
        for kept in [
            "nm/host@EXAMPLE.COM",
            "_HOST@EXAMPLE.COM",
            "nm/_HOSTS@EXAMPLE.COM",
            "nm/_HOST/x@EXAMPLE.COM",
            "nm/_host@EXAMPLE.COM",
        ] {
            assert_eq!(expanded(kept), kept);
        }
        let no_name = || Err(std::io::Error::other("no name"));
        assert!(expand_host("nm/_HOST@R", no_name).is_err());
        assert_eq!(expand_host("nm@R", no_name).unwrap(), "nm@R");
    }

    #[test]
    fn negotiate_challenges_are_recognised() {
        let mut h = HeaderMap::new();
        h.append(WWW_AUTHENTICATE, HeaderValue::from_static("Basic realm=x"));
        assert!(!asks_for_negotiate(&h));
        h.append(WWW_AUTHENTICATE, HeaderValue::from_static("Negotiate"));
        assert!(asks_for_negotiate(&h));
    }
}
