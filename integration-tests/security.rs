//! Security as an operator meets it: the real `preemptor agent` and `preemptor controller`
//! binaries refuse token files that group or others can read, and the agent API over TLS
//! with a CA generated here.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn preemptor() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_preemptor"));
    c.env_remove("PREEMPTOR_LOG_FORMAT")
        .env_remove("PREEMPTOR_AGENT_TOKEN_FILE")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Runs `cmd` to its end; a process still running after `limit` started despite the
/// bad token file, so it is killed and the test fails.
fn run_briefly(mut cmd: Command, limit: Duration) -> Output {
    let mut child = cmd.spawn().expect("spawning preemptor");
    let start = Instant::now();
    loop {
        match child.try_wait().expect("waiting for preemptor") {
            Some(_) => return child.wait_with_output().expect("reading its output"),
            None if start.elapsed() > limit => {
                let _ = child.kill();
                let out = child.wait_with_output().expect("reading its output");
                panic!(
                    "still running after {limit:?}; stderr:\n{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

fn write_token(path: &Path, mode: u32) {
    std::fs::write(path, "a-token-for-tests\n").expect("token file");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn assert_refused(out: &Output, path: &Path, mode: &str) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let shown = path.display().to_string();
    assert!(
        stderr.contains(&format!("token file {shown} has mode {mode}")),
        "{stderr}"
    );
    assert!(stderr.contains(&format!("chmod 600 {shown}")), "{stderr}");
    assert!(!stderr.contains("a-token-for-tests"), "{stderr}");
    stderr
}

#[test]
fn the_agent_refuses_a_token_file_others_can_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let token = dir.path().join("agent.token");
    let agent = |token: &Path| {
        let mut c = preemptor();
        c.args([
            "agent",
            "--dry-run",
            "--listen",
            "127.0.0.1:0",
            "--token-file",
        ])
        .arg(token)
        .arg("--state-dir")
        .arg(dir.path().join("state"));
        c
    };
    write_token(&token, 0o644);
    let out = run_briefly(agent(&token), Duration::from_secs(20));
    assert_refused(&out, &token, "0644");

    // The same file, private: the agent starts (and is stopped here).
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let mut child = agent(&token).spawn().expect("spawning the agent");
    let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    let n = std::io::BufRead::read_line(&mut stdout, &mut line).unwrap_or(0);
    let _ = child.kill();
    let out = child.wait_with_output().expect("agent output");
    assert!(
        n > 0 && line.starts_with("preemptor agent listening on http://127.0.0.1:"),
        "{line:?}; stderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_controller_refuses_token_files_others_can_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let conf = dir.path();
    let agent_token = conf.join("agent.token");
    let api_token = conf.join("controller.token");
    // Tokens are written below, with the modes under test.
    crate::common::controller_conf_dir(
        conf,
        &[],
        &[
            ("yarn.preemptor.rm.address", "127.0.0.1:1".into()),
            (
                "yarn.preemptor.agent.token-file",
                agent_token.display().to_string(),
            ),
            (
                "yarn.preemptor.controller.token-file",
                api_token.display().to_string(),
            ),
            ("yarn.preemptor.controller.listen", "127.0.0.1:0".into()),
        ],
    );
    let controller = || {
        let mut c = preemptor();
        c.args(["controller", "--conf-dir"]).arg(conf);
        c
    };

    write_token(&agent_token, 0o644);
    write_token(&api_token, 0o600);
    let out = run_briefly(controller(), Duration::from_secs(20));
    let stderr = assert_refused(&out, &agent_token, "0644");
    assert!(
        stderr.contains("yarn.preemptor.agent.token-file"),
        "{stderr}"
    );

    std::fs::set_permissions(&agent_token, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    std::fs::set_permissions(&api_token, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    let out = run_briefly(controller(), Duration::from_secs(20));
    let stderr = assert_refused(&out, &api_token, "0640");
    assert!(
        stderr.contains("yarn.preemptor.controller.token-file"),
        "{stderr}"
    );
}

/// A CA, and a certificate for `127.0.0.1` and `localhost` it signed, as PEM files: the
/// key `0600`, as the agent requires.
struct Pki {
    _dir: tempfile::TempDir,
    ca: std::path::PathBuf,
    cert: std::path::PathBuf,
    key: std::path::PathBuf,
}

fn pki() -> Pki {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca_key = rcgen::KeyPair::generate().expect("CA key");
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "preemptor test CA");
    let ca = rcgen::CertifiedIssuer::self_signed(ca, ca_key).expect("CA");
    let key = rcgen::KeyPair::generate().expect("agent key");
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()])
        .expect("agent params")
        .signed_by(&key, &ca)
        .expect("agent certificate");
    let (ca_file, cert_file, key_file) = (
        dir.path().join("ca.crt"),
        dir.path().join("agent.crt"),
        dir.path().join("agent.key"),
    );
    std::fs::write(&ca_file, ca.pem()).expect("ca.crt");
    std::fs::write(&cert_file, cert.pem()).expect("agent.crt");
    std::fs::write(&key_file, key.serialize_pem()).expect("agent.key");
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    Pki {
        _dir: dir,
        ca: ca_file,
        cert: cert_file,
        key: key_file,
    }
}

/// An error with its causes, where rustls' reason is.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

const CONTAINER: &str = "container_1700000000000_0001_01_000002";

/// The agent serves HTTPS with its certificate; the controller's actuator, given the
/// CA, reaches it (leases, actions, event stream); plain HTTP, an untrusting client and
/// a wrong token are all refused.
#[tokio::test]
async fn the_controller_reaches_a_tls_agent_and_verifies_it() {
    use futures_util::StreamExt;
    use preemptor::agent::AgentClient;
    use preemptor::agent::api::AgentEvent;
    use preemptor::cluster::NodeId;
    use preemptor::controller::agents::{Actuator, HttpAgents};
    use preemptor::tls::{client_config, server_config};

    let pki = pki();
    let state = tempfile::tempdir().expect("tempdir");
    let mut config =
        preemptor::agent::AgentConfig::new(b"tls-token".to_vec(), state.path().to_path_buf());
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.dry_run = true;
    config.tls = Some(server_config(&pki.cert, &pki.key).expect("server config"));
    let agent = preemptor::agent::start(config).await.expect("agent starts");
    let url = agent.url();
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    let port = agent.local_addr().port();

    // The controller's own path: settings with the CA file, an explicit http:// address
    // (upgraded to https), the Actuator it calls every tick.
    let settings = preemptor::config::settings::AgentSettings {
        addresses: vec![("127.0.0.1:45454".into(), format!("http://127.0.0.1:{port}"))],
        tls_ca_file: Some(pki.ca.clone()),
        ..preemptor::config::settings::PreemptorSettings::default().agent
    };
    let agents = HttpAgents::new(&settings, "tls-token", "controller@test").expect("CA read");
    let key = agents
        .agent_for(&NodeId::new("127.0.0.1:45454"))
        .expect("an agent");
    assert_eq!(key, format!("https://127.0.0.1:{port}"));
    agents
        .renew_lease(&key, Duration::from_secs(30))
        .await
        .expect("lease over TLS");
    let mut events = agents.events(&key).await.expect("event stream over TLS");
    let req = preemptor::agent::api::ActionRequest {
        container: CONTAINER.into(),
        action: preemptor::agent::api::Action::Kill,
    };
    let done = agents.act(&key, req).await.expect("action over TLS");
    assert!(done.dry_run);
    let event = tokio::time::timeout(Duration::from_secs(10), events.next())
        .await
        .expect("an event in time")
        .expect("the stream is open")
        .expect("an event");
    assert!(matches!(event, AgentEvent::Action { .. }), "{event:?}");
    assert!(agents.containers(&key).await.is_ok());

    // Plain HTTP on the TLS port gets no answer.
    let plain = AgentClient::new(
        &format!("http://127.0.0.1:{port}"),
        "tls-token",
        Duration::from_secs(5),
    )
    .expect("client");
    assert!(plain.lease().await.is_err());

    // A client that trusts another CA refuses the agent's certificate.
    let other = crate::security::pki();
    let untrusting = AgentClient::with_tls(
        &url,
        "tls-token",
        Duration::from_secs(5),
        Some(client_config(&other.ca).expect("other CA")),
    )
    .expect("client");
    let e = untrusting.lease().await.unwrap_err();
    let text = match &e {
        preemptor::agent::client::ClientError::Transport { error, .. } => chain(error),
        other => panic!("{other}"),
    };
    assert!(text.contains("invalid peer certificate"), "{text}");

    // TLS does not replace the token.
    let wrong = AgentClient::with_tls(
        &url,
        "not-the-token",
        Duration::from_secs(5),
        Some(client_config(&pki.ca).expect("CA")),
    )
    .expect("client");
    let e = wrong.lease().await.unwrap_err();
    assert_eq!(e.status().map(|s| s.as_u16()), Some(401), "{e}");

    drop(events);
    tokio::time::timeout(Duration::from_secs(10), agent.shutdown())
        .await
        .expect("the TLS agent shuts down");
}

/// The real binary with --tls-cert/--tls-key: it announces an https URL and answers
/// over TLS; a world-readable key or a certificate without its key is refused.
#[test]
fn the_agent_binary_serves_https() {
    let pki = pki();
    let dir = tempfile::tempdir().expect("tempdir");
    let token = dir.path().join("agent.token");
    write_token(&token, 0o600);
    let agent = |extra: &[&std::ffi::OsStr]| {
        let mut c = preemptor();
        c.args([
            "agent",
            "--dry-run",
            "--listen",
            "127.0.0.1:0",
            "--token-file",
        ])
        .arg(&token)
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .args(extra);
        c
    };
    let mut child = agent(&[
        "--tls-cert".as_ref(),
        pki.cert.as_os_str(),
        "--tls-key".as_ref(),
        pki.key.as_os_str(),
    ])
    .spawn()
    .expect("spawning the agent");
    let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    let _ = std::io::BufRead::read_line(&mut stdout, &mut line);
    let url = line
        .trim()
        .rsplit(' ')
        .next()
        .unwrap_or_default()
        .to_string();
    let answered = url.starts_with("https://127.0.0.1:").then(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let client = preemptor::agent::AgentClient::with_tls(
                &url,
                "a-token-for-tests",
                Duration::from_secs(10),
                Some(preemptor::tls::client_config(&pki.ca).expect("CA")),
            )
            .expect("client");
            client.health().await.map(|h| h.dry_run)
        })
    });
    let _ = child.kill();
    let out = child.wait_with_output().expect("agent output");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        matches!(answered, Some(Ok(true))),
        "{line:?} {answered:?}\n{stderr}"
    );

    std::fs::set_permissions(&pki.key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let out = run_briefly(
        agent(&[
            "--tls-cert".as_ref(),
            pki.cert.as_os_str(),
            "--tls-key".as_ref(),
            pki.key.as_os_str(),
        ]),
        Duration::from_secs(20),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("TLS key file") && stderr.contains("0644"),
        "{stderr}"
    );

    let out = run_briefly(
        agent(&["--tls-cert".as_ref(), pki.cert.as_os_str()]),
        Duration::from_secs(20),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--tls-key"), "{stderr}");
}
