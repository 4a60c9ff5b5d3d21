//! Preemptor against a real Hadoop YARN whose web endpoints are secured:
//! `yarn.http.policy=HTTPS_ONLY` (`cluster.sh up --https`, a CA and keystore made by the
//! script), and SPNEGO (`hadoop.http.authentication.type=kerberos`) with principals and
//! keytabs from a real MIT KDC (`deploy/kdc/kdc.sh`).
//!
//! The RM client, the controller and the agent's NodeManager check verify the daemons'
//! certificates against the CA file, and a wrong CA is an error that names the host. The
//! Kerberos test runs the `preemptor` binary: the system's GSSAPI finds the test realm
//! through `KRB5_CONFIG`, which is process-wide.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use preemptor::agent::nodemanager::{NodeManager, NodeManagerError};
use preemptor::config::queues::QueueTree;
use preemptor::config::settings::{PreemptorSettings, YarnTls};
use preemptor::controller::controller::{ControllerConfig, start};
use preemptor::yarn::RmClient;

use serde_json::Value;

use crate::hadoop_real::{
    Cluster, ControllerProcess, DICE_QUEUES, RM_QUEUES, SHIPPED_QUEUES, closed_port, queue_paths,
    status_with_queues,
};
use crate::kdc_support::Kdc;

/// A CA that signed nothing the cluster serves, as PEM in `dir`.
fn other_ca(dir: &Path) -> PathBuf {
    let key = rcgen::KeyPair::generate().expect("CA key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "not the cluster's CA");
    let cert = params.self_signed(&key).expect("CA");
    let path = dir.join("other-ca.pem");
    std::fs::write(&path, cert.pem()).expect("write CA");
    path
}

fn rm_client(rm: &str, tls: YarnTls) -> RmClient {
    let mut s = PreemptorSettings::default().rm;
    s.addresses = vec![rm.to_string()];
    s.tls = tls;
    RmClient::new(&s).expect("RM client")
}

#[test]
fn the_controller_reads_a_real_https_rm_and_a_wrong_ca_names_the_host() {
    let test = "the_controller_reads_a_real_https_rm_and_a_wrong_ca_names_the_host";
    let Some(c) = Cluster::up(test, RM_QUEUES, &["--nodes", "1", "--https"]) else {
        return;
    };
    let ca = PathBuf::from(c.h.ca_file.clone().expect("HADOOP_CA_FILE from up --https"));
    assert!(c.h.rm.starts_with("https://"), "{}", c.h.rm);
    let nm = c.h.nm_webapps[0].clone();
    assert!(nm.starts_with("https://"), "{nm}");
    let scratch = tempfile::tempdir().expect("temp dir");
    let wrong = other_ca(scratch.path());
    let trusted = YarnTls {
        ca_file: Some(ca.clone()),
        verify_hostname: true,
    };
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        // The RM client, trusting the cluster's CA.
        let rm = rm_client(&c.h.rm, trusted.clone());
        let nodes = rm.nodes().await.expect("nodes over HTTPS").value;
        assert_eq!(nodes.len(), 1, "{nodes:?}");

        // Another CA: refused, and the error names the RM it could not trust.
        let e = rm_client(
            &c.h.rm,
            YarnTls {
                ca_file: Some(wrong.clone()),
                verify_hostname: true,
            },
        )
        .cluster_info()
        .await
        .expect_err("a certificate of another CA");
        let said = e.to_string();
        assert!(said.contains(&c.h.rm), "the RM is not named: {said}");
        assert!(said.contains("UnknownIssuer"), "{said}");

        // The agent's NodeManager check, with the CA and with another one.
        let t = Duration::from_secs(10);
        let listed = NodeManager::new(&nm, t, &trusted)
            .expect("NodeManager")
            .containers(true)
            .await
            .expect("the NodeManager's containers over HTTPS");
        assert!(listed.is_empty(), "{listed:?}");
        let e = NodeManager::new(
            &nm,
            t,
            &YarnTls {
                ca_file: Some(wrong.clone()),
                verify_hostname: true,
            },
        )
        .expect("NodeManager")
        .containers(true)
        .await
        .expect_err("a NodeManager certificate of another CA");
        assert!(matches!(e, NodeManagerError::Unavailable { .. }), "{e}");
        let said = e.to_string();
        assert!(said.contains(&nm), "the NodeManager is not named: {said}");
        assert!(said.contains("UnknownIssuer"), "{said}");

        // The controller, observe-only, shows the RM's queues.
        let mut conf = preemptor::config::xml::Configuration::new();
        conf.add_file(SHIPPED_QUEUES).expect("shipped file");
        let mut settings = PreemptorSettings::default();
        settings.rm.addresses = vec![c.h.rm.clone()];
        settings.rm.tls = trusted.clone();
        settings.policy.observe_only = true;
        settings.agent.port = closed_port();
        let state = tempfile::tempdir().expect("controller state dir");
        settings.controller.state_dir = state.path().to_path_buf();
        let controller = start(ControllerConfig {
            settings,
            queues: QueueTree::from_conf(&conf).expect("shipped queues"),
            conf_dir: None,
            agent_token: "agent-token".into(),
            api_token: b"api-token".to_vec(),
            api_listen: Some("127.0.0.1:0".parse().expect("addr")),
            proxy_listen: None,
            actuator: None,
        })
        .await
        .expect("controller starts");
        let status_url = format!("{}/api/v1/status", controller.api_url().expect("api url"));
        let status = status_with_queues(&status_url).await;
        assert_eq!(
            queue_paths(&status),
            ["root", "root.interactive", "root.batch"],
            "{status}"
        );
        controller.shutdown(true).await.expect("controller stops");
    });
}

/// The lifetime of the controller principal's tickets in the Kerberos test. MIT renews
/// a ticket due within 30 s at every acquisition, so a shorter life would renew on every
/// request and hide whether renewal at half-life works.
const TICKET_LIFE_SECS: u64 = 60;

/// A loopback port free a moment ago, for a controller API the test must find.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// The controller's status, or `None` while its API does not answer.
fn status(port: u16) -> Option<Value> {
    let out = std::process::Command::new("curl")
        .args(["-sS", "--fail", "--max-time", "5", "-H"])
        .arg("Authorization: Bearer api-token")
        .arg(format!("http://127.0.0.1:{port}/api/v1/status"))
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).ok())
        .flatten()
}

/// Polls `f` every 200 ms for at most `limit`.
fn poll<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The controller binary, acting (Dice: it makes its node label on the RM at once),
/// attached to a real RM whose web endpoints are under SPNEGO and HTTPS. With a keytab
/// of other keys, or a principal the keytab does not hold, it says why in its log and
/// changes nothing on the RM; a keytab others can read stops it at start. With the right
/// identity it shows the RM's queues, makes its label, and removes it on SIGTERM. What
/// the RM holds is read with `curl --negotiate`, not with Preemptor.
#[test]
fn the_controller_acts_on_a_kerberized_https_rm_and_refuses_a_wrong_identity() {
    let test = "the_controller_acts_on_a_kerberized_https_rm_and_refuses_a_wrong_identity";
    let dir = tempfile::Builder::new()
        .prefix("preemptor-kerberos-test-")
        .tempdir()
        .expect("temp dir");
    let d = dir.path();
    let Some(kdc) = Kdc::up(test, &d.join("kdc")) else {
        return;
    };
    // A second KDC of the same realm: a keytab for the same principal, with other keys.
    let Some(other_kdc) = Kdc::up(test, &d.join("kdc-other")) else {
        return;
    };
    let http_keytab = d.join("http.keytab");
    kdc.keytab(&http_keytab, &["HTTP/localhost"]);
    // The controller is configured as preemptor/_HOST, as Hadoop's services are; the
    // KDC knows it by this host's name. Short tickets: the controller must get new ones
    // from the keytab as it runs.
    let host = preemptor::kerberos::local_host_name()
        .expect("this host's name")
        .to_lowercase();
    let instance = format!("preemptor/{host}");
    let keytab = d.join("preemptor.keytab");
    kdc.keytab_with_life(&keytab, &[&instance], Some(TICKET_LIFE_SECS));
    let expired_keytab = d.join("expired.keytab");
    kdc.keytab(&expired_keytab, &["expired"]);
    kdc.expire("expired");
    let expired = kdc.principal("expired");
    let wrong_keytab = d.join("wrong.keytab");
    other_kdc.keytab(&wrong_keytab, &[&instance]);
    let principal = kdc.principal(&instance);
    let configured = kdc.principal("preemptor/_HOST");

    let spnego = kdc.principal("HTTP/localhost");
    let (http_keytab_s, krb5_conf) = (
        http_keytab.display().to_string(),
        kdc.krb5_conf.display().to_string(),
    );
    let args = [
        "--nodes",
        "1",
        "--https",
        "--spnego-principal",
        &spnego,
        "--spnego-keytab",
        &http_keytab_s,
        "--krb5-conf",
        &krb5_conf,
        "--set",
        "yarn.node-labels.enabled=true",
        "--set",
        "yarn.node-labels.configuration-type=centralized",
        // hadoop.auth cookies of 10 s, so that tokens are made all along.
        "--set",
        "hadoop.http.authentication.token.validity=10",
    ];
    let Some(c) = Cluster::up(test, DICE_QUEUES, &args) else {
        return;
    };
    let ca = PathBuf::from(c.h.ca_file.clone().expect("HADOOP_CA_FILE"));
    assert!(c.h.rm.starts_with("https://localhost:"), "{}", c.h.rm);
    let labels = || {
        let body = kdc.curl(
            d,
            &keytab,
            &principal,
            &ca,
            &format!("{}/ws/v1/cluster/get-node-labels", c.h.rm),
        );
        serde_json::from_str::<Value>(&body).expect("node labels JSON")
    };
    let no_labels = |v: &Value| {
        v["nodeLabelInfo"].is_null() || v["nodeLabelInfo"].as_array().is_some_and(|a| a.is_empty())
    };
    assert!(
        no_labels(&labels()),
        "a fresh RM has no labels: {}",
        labels()
    );

    let port = free_port();
    let conf = d.join("controller-conf");
    let proxy_port = free_port();
    let write_conf = |principal: &str, keytab: &Path| {
        let _ = std::fs::remove_dir_all(&conf);
        std::fs::create_dir(&conf).expect("controller conf dir");
        crate::common::controller_conf_dir(
            &conf,
            &[("agent.token", "agent-token"), ("api.token", "api-token")],
            &[
                ("yarn.preemptor.rm.address", c.h.rm.clone()),
                ("yarn.preemptor.rm.tls.ca-file", ca.display().to_string()),
                (
                    "yarn.preemptor.rm.kerberos.principal",
                    principal.to_string(),
                ),
                (
                    "yarn.preemptor.rm.kerberos.keytab",
                    keytab.display().to_string(),
                ),
                ("yarn.preemptor.policy", "dice".into()),
                ("yarn.preemptor.monitoring-interval-ms", "1000".into()),
                // No agent answers: partitions go to the RM alone.
                ("yarn.preemptor.agent.port", closed_port().to_string()),
                (
                    "yarn.preemptor.agent.token-file",
                    conf.join("agent.token").display().to_string(),
                ),
                (
                    "yarn.preemptor.proxy.listen",
                    format!("127.0.0.1:{proxy_port}"),
                ),
                (
                    "yarn.preemptor.controller.listen",
                    format!("127.0.0.1:{port}"),
                ),
                (
                    "yarn.preemptor.controller.token-file",
                    conf.join("api.token").display().to_string(),
                ),
            ],
        );
        std::fs::write(conf.join("capacity-scheduler.xml"), DICE_QUEUES).expect("queues");
    };
    let spawn = |log: &Path| {
        let log_file = std::fs::File::create(log).expect("controller log");
        ControllerProcess(
            std::process::Command::new(env!("CARGO_BIN_EXE_preemptor"))
                .args(["controller", "--conf-dir"])
                .arg(&conf)
                .env("RUST_LOG", "info")
                .env("KRB5_CONFIG", &kdc.krb5_conf)
                .stdin(std::process::Stdio::null())
                .stdout(log_file.try_clone().expect("log"))
                .stderr(log_file)
                .spawn()
                .expect("spawning preemptor controller"),
        )
    };
    let read = |log: &Path| std::fs::read_to_string(log).unwrap_or_default();

    // A keytab of other keys, a principal the keytab does not hold, an expired account:
    // the RM is never reached, the log says why, and nothing changes on the RM.
    let stranger = kdc.principal("stranger");
    let wrong = [
        (
            principal.as_str(),
            wrong_keytab.as_path(),
            // The KDC's answer does not decrypt with the other keys (or, where the KDC
            // asks for pre-authentication, it refuses them).
            ["Decrypt integrity check failed", "Preauthentication failed"],
        ),
        (
            stranger.as_str(),
            keytab.as_path(),
            ["as stranger@", "as stranger@"],
        ),
        // With a keytab MIT renews a ticket before it expires; what can expire is the
        // account.
        (
            expired.as_str(),
            expired_keytab.as_path(),
            [
                "Client's entry in database has expired",
                "Client's entry in database has expired",
            ],
        ),
    ];
    for (i, (who, with, expected)) in wrong.into_iter().enumerate() {
        write_conf(who, with);
        let log = d.join(format!("controller-wrong-{i}.log"));
        let _controller = spawn(&log);
        let s = poll("a status without the RM", Duration::from_secs(60), || {
            status(port).filter(|s| s["rmReachable"] == false)
        });
        let said = |l: &str| l.contains("Kerberos") && expected.iter().any(|e| l.contains(e));
        let deadline = Instant::now() + Duration::from_secs(30);
        while !said(&read(&log)) {
            assert!(
                Instant::now() < deadline,
                "no Kerberos error naming {expected:?} in the log:\n{}",
                read(&log)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        std::thread::sleep(Duration::from_secs(3));
        let l = read(&log);
        assert!(l.contains(who), "the principal is not named: {l}");
        assert!(no_labels(&labels()), "{who} changed the RM: {}", labels());
        eprintln!("{who} with {}: {s}", with.display());
    }

    // A keytab others can read: refused at start, exit status 1.
    write_conf(&configured, &keytab);
    std::fs::set_permissions(&keytab, std::os::unix::fs::PermissionsExt::from_mode(0o644))
        .expect("chmod 644");
    let log = d.join("controller-644.log");
    let mut controller = spawn(&log);
    let exit = poll("the controller to stop", Duration::from_secs(30), || {
        controller.0.try_wait().expect("wait")
    });
    assert_eq!(exit.code(), Some(1), "{}", read(&log));
    assert!(read(&log).contains("chmod 600"), "{}", read(&log));
    std::fs::set_permissions(&keytab, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("chmod 600");

    // The right identity: the queues, the label, and the label gone after SIGTERM.
    let log = d.join("controller.log");
    let mut controller = spawn(&log);
    let s = poll(
        "a status with the RM's queues",
        Duration::from_secs(60),
        || {
            status(port).filter(|s| {
                s["rmReachable"] == true && s["queues"].as_array().is_some_and(|q| q.len() == 3)
            })
        },
    );
    let paths = queue_paths(&s);
    assert_eq!(paths, ["root", "root.short", "root.long"], "{s}");
    let made = poll("the label on the RM", Duration::from_secs(30), || {
        let v = labels();
        (!no_labels(&v)).then_some(v)
    });
    assert!(made.to_string().contains("\"short\""), "{made}");
    // The RM proxy passes the client's own SPNEGO through, and never adds Preemptor's.
    let through_proxy = format!("http://localhost:{proxy_port}/ws/v1/cluster/info");
    let (code, body) = kdc.curl_status(d, Some((&keytab, &principal)), None, &through_proxy);
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("clusterInfo"), "{body}");
    let (code, body) = kdc.curl_status(d, None, None, &through_proxy);
    assert_eq!(code, 401, "the proxy added credentials: {body}");
    // Three ticket lives: every token needs a service ticket, and a new TGT comes from
    // the keytab at each half-life (MIT's refresh), never per request. The RM must
    // answer all along.
    let kdc_log_before = kdc.log().len();
    let until = Instant::now() + Duration::from_secs(3 * TICKET_LIFE_SECS);
    while Instant::now() < until {
        std::thread::sleep(Duration::from_secs(2));
        let l = read(&log);
        assert!(
            !l.contains("ResourceManager unreachable"),
            "the RM was lost as tickets expired:\n{l}"
        );
    }
    let s = status(port).expect("the controller's status");
    assert_eq!(s["rmReachable"], true, "{s}");
    // Nothing else asked the KDC meanwhile: these are the controller's new tickets.
    let new_tgts = kdc.log()[kdc_log_before..]
        .lines()
        .filter(|l| l.contains("AS_REQ") && l.contains(&principal))
        .count();
    assert!(
        (2..=8).contains(&new_tgts),
        "{new_tgts} new TGTs for {principal} in three ticket lives, expected one per half-life"
    );

    // SAFETY: kill(2) on the child's pid.
    unsafe { libc::kill(controller.0.id() as i32, libc::SIGTERM) };
    let exit = poll("the controller to stop", Duration::from_secs(60), || {
        controller.0.try_wait().expect("wait")
    });
    assert!(exit.success(), "{exit}: {}", read(&log));
    assert!(no_labels(&labels()), "left behind: {}", labels());
    assert!(!read(&log).contains("Kerberos:"), "{}", read(&log));
}
