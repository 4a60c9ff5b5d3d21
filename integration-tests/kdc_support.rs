//! A real MIT Kerberos KDC for the tests, from `deploy/kdc/kdc.sh`: its own realm,
//! database and port in a directory of the test's own, stopped when the guard drops.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::hadoop_support::skip_or_fail;

const KDC_SH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/kdc/kdc.sh");

/// A running KDC; `kdc.sh down` when dropped.
pub struct Kdc {
    pub work: PathBuf,
    /// The clients' krb5.conf (`KRB5_CONFIG`).
    pub krb5_conf: PathBuf,
    pub realm: String,
}

impl Kdc {
    /// A KDC in `work`, or `None` (a skip outside CI, a failure under `CI=true`) when
    /// Debian's krb5-kdc, krb5-admin-server and krb5-user are not installed.
    pub fn up(test: &str, work: &Path) -> Option<Kdc> {
        for tool in ["krb5kdc", "kadmin.local", "kdb5_util", "kinit"] {
            let found = Command::new("sh")
                .args(["-c", &format!("command -v {tool}")])
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if !found {
                skip_or_fail(test, &format!("{tool} not found, no KDC"));
                return None;
            }
        }
        // Built before `up` runs, so that a failed `up` is still brought down.
        let mut kdc = Kdc {
            work: work.to_path_buf(),
            krb5_conf: PathBuf::new(),
            realm: String::new(),
        };
        let out = kdc.run(&["up"]);
        for line in out.lines() {
            if let Some(v) = line.strip_prefix("KRB5_CONFIG=") {
                kdc.krb5_conf = PathBuf::from(v.trim().trim_matches(['\'', '"']));
            } else if let Some(v) = line.strip_prefix("KRB5_REALM=") {
                kdc.realm = v.trim().trim_matches(['\'', '"']).to_string();
            }
        }
        assert!(kdc.krb5_conf.is_file(), "no KRB5_CONFIG in {out:?}");
        assert!(!kdc.realm.is_empty(), "no KRB5_REALM in {out:?}");
        Some(kdc)
    }

    /// Adds `principals` (without a realm: the KDC's) and exports them into `keytab`.
    pub fn keytab(&self, keytab: &Path, principals: &[&str]) {
        self.keytab_with_life(keytab, principals, None);
    }

    /// [`Kdc::keytab`], with the principals' tickets lasting at most `max_life`.
    pub fn keytab_with_life(&self, keytab: &Path, principals: &[&str], max_life: Option<u64>) {
        let mut args = vec!["principal".to_string()];
        args.extend(principals.iter().map(|p| p.to_string()));
        args.extend(["--keytab".to_string(), keytab.display().to_string()]);
        if let Some(secs) = max_life {
            args.extend(["--max-life".to_string(), secs.to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.run(&args);
    }

    /// Makes `name`'s account expire now (`modprinc -expire`): the KDC then refuses it
    /// tickets, whatever keys its keytab holds.
    pub fn expire(&self, name: &str) {
        let out = Command::new("kadmin.local")
            .args([
                "-q",
                &format!("modprinc -expire \"{}\" {name}", "2000-01-01 00:00:00 UTC"),
            ])
            .env("KRB5_KDC_PROFILE", self.work.join("kdc.conf"))
            .env("KRB5_CONFIG", &self.krb5_conf)
            .output()
            .expect("kadmin.local");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && !said.contains("rror"),
            "kadmin.local modprinc -expire {name}: {said}"
        );
    }

    /// The KDC's log so far (`krb5kdc.log`: one line per AS_REQ and TGS_REQ).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.work.join("logs").join("krb5kdc.log")).unwrap_or_default()
    }

    /// `name@REALM`.
    pub fn principal(&self, name: &str) -> String {
        format!("{name}@{}", self.realm)
    }

    /// `curl --negotiate` as `principal`, with a ticket from `keytab` in a ticket cache
    /// under `dir`: what an operator's shell does, to read what the RM holds without
    /// Preemptor's own client. Fails the test unless the answer is 2xx.
    pub fn curl(&self, dir: &Path, keytab: &Path, principal: &str, ca: &Path, url: &str) -> String {
        let (status, body) = self.curl_status(dir, Some((keytab, principal)), Some(ca), url);
        assert!((200..300).contains(&status), "curl {url}: {status} {body}");
        body
    }

    /// `kinit` as `principal` from `keytab` into a ticket cache under `dir`; its
    /// `KRB5CCNAME`.
    pub fn kinit(&self, dir: &Path, keytab: &Path, principal: &str) -> String {
        let ccache = format!("FILE:{}", dir.join("kinit.ccache").display());
        let out = Command::new("kinit")
            .arg("-kt")
            .arg(keytab)
            .arg(principal)
            .env("KRB5_CONFIG", &self.krb5_conf)
            .env("KRB5CCNAME", &ccache)
            .output()
            .expect("kinit");
        assert!(
            out.status.success(),
            "kinit: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        ccache
    }

    /// The HTTP status and body of a GET of `url`, with SPNEGO as `as_` (keytab,
    /// principal) when given, else with no credentials at all.
    pub fn curl_status(
        &self,
        dir: &Path,
        as_: Option<(&Path, &str)>,
        ca: Option<&Path>,
        url: &str,
    ) -> (u16, String) {
        let mut curl = Command::new("curl");
        curl.args([
            "-sS",
            "-w",
            "\n%{http_code}",
            "-H",
            "Accept: application/json",
        ])
        .env("KRB5_CONFIG", &self.krb5_conf);
        match as_ {
            Some((keytab, principal)) => {
                curl.env("KRB5CCNAME", self.kinit(dir, keytab, principal))
                    .args(["--negotiate", "-u", ":"]);
            }
            // An empty ticket cache, never the machine's default one.
            None => {
                curl.env(
                    "KRB5CCNAME",
                    format!("FILE:{}", dir.join("none.ccache").display()),
                );
            }
        }
        if let Some(ca) = ca {
            curl.arg("--cacert").arg(ca);
        }
        let out = curl.arg(url).output().expect("curl");
        assert!(
            out.status.success(),
            "curl {url}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", text.as_str()));
        (
            code.trim().parse().expect("curl's %{http_code}"),
            body.to_string(),
        )
    }

    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("bash")
            .arg(KDC_SH)
            .arg("--work-dir")
            .arg(&self.work)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run kdc.sh");
        assert!(
            out.status.success(),
            "kdc.sh {args:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Kdc {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(KDC_SH)
            .arg("--work-dir")
            .arg(&self.work)
            .arg("down")
            .stdin(Stdio::null())
            .status();
    }
}
