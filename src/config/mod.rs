//! Hadoop `<configuration>` files: the XML reader, the capacity scheduler's queue tree and
//! Preemptor's own typed settings. Reads files; does nothing else.
//!
//! [`load_dir`] reads a conf directory the way Preemptor runs on it;
//! [`load_embedded_default`] reads the example in `hadoop-conf/`, compiled in, so that
//! `preemptor demo` needs no files.

pub mod error;
pub mod queues;
pub mod secret;
pub mod settings;
pub mod values;
pub mod xml;

use std::path::{Path, PathBuf};

use serde::Serialize;

pub use error::{ConfigError, ConfigErrors, ConfigWarning, Location, QueueProblem};
pub use queues::{QueueConfig, QueueTree};
pub use settings::PreemptorSettings;
pub use xml::{Configuration, Env};

use values::parse_bool;

pub const CAPACITY_SCHEDULER_XML: &str = "capacity-scheduler.xml";
pub const PREEMPTOR_SITE_XML: &str = "preemptor-site.xml";
pub const YARN_SITE_XML: &str = "yarn-site.xml";

const CAPACITY_SCHEDULER_CLASS: &str =
    "org.apache.hadoop.yarn.server.resourcemanager.scheduler.capacity.CapacityScheduler";

/// A validated configuration: the queue tree, Preemptor's settings, and every warning
/// seen while reading them (final overrides, unknown keys, settings that work against
/// Preemptor).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LoadedConfig {
    pub queues: QueueTree,
    pub settings: PreemptorSettings,
    pub warnings: Vec<ConfigWarning>,
    /// The files read, by the names their locations use.
    pub files: Vec<String>,
}

/// Reads `dir/capacity-scheduler.xml` (required), `dir/preemptor-site.xml` (defaults
/// when absent) and `dir/yarn-site.xml` (optional, checked for settings that clash with
/// Preemptor). `${env.*}` reads the process environment.
pub fn load_dir(dir: &Path) -> Result<LoadedConfig, ConfigErrors> {
    load_dir_with_env(dir, Env::Process)
}

/// [`load_dir`] with the environment `${env.*}` sees.
pub fn load_dir_with_env(dir: &Path, env: Env) -> Result<LoadedConfig, ConfigErrors> {
    if !dir.is_dir() {
        return Err(ConfigError::MissingFile {
            path: dir.to_path_buf(),
            what: "the configuration directory",
        }
        .into());
    }
    let Some(required) = config_file(dir, CAPACITY_SCHEDULER_XML)? else {
        return Err(ConfigError::MissingFile {
            path: dir.join(CAPACITY_SCHEDULER_XML),
            what: CAPACITY_SCHEDULER_XML,
        }
        .into());
    };
    load(
        required,
        config_file(dir, PREEMPTOR_SITE_XML)?,
        config_file(dir, YARN_SITE_XML)?,
        env,
    )
}

/// `dir/name` if it is there; an error if something other than a file is there.
fn config_file(dir: &Path, name: &str) -> Result<Option<Source>, ConfigError> {
    let path = dir.join(name);
    match std::fs::symlink_metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ConfigError::Io { path, source }),
        Ok(_) if path.is_file() => Ok(Some(Source::File(path))),
        Ok(_) => Err(ConfigError::NotAFile { path }),
    }
}

/// The example configuration shipped in `hadoop-conf/`, compiled into the binary.
pub fn load_embedded_default() -> Result<LoadedConfig, ConfigErrors> {
    load(
        Source::Embedded {
            name: "embedded:hadoop-conf/capacity-scheduler.xml",
            text: include_str!("../../hadoop-conf/capacity-scheduler.xml"),
        },
        Some(Source::Embedded {
            name: "embedded:hadoop-conf/preemptor-site.xml",
            text: include_str!("../../hadoop-conf/preemptor-site.xml"),
        }),
        Some(Source::Embedded {
            name: "embedded:hadoop-conf/yarn-site.xml",
            text: include_str!("../../hadoop-conf/yarn-site.xml"),
        }),
        Env::Process,
    )
}

enum Source {
    File(PathBuf),
    Embedded {
        name: &'static str,
        text: &'static str,
    },
}

impl Source {
    fn read(&self, env: &Env, files: &mut Vec<String>) -> Result<Configuration, ConfigError> {
        let mut conf = match env {
            Env::Process => Configuration::new(),
            Env::Fixed(map) => Configuration::with_env(map.clone()),
        };
        match self {
            Source::File(path) => {
                files.push(path.display().to_string());
                conf.add_file(path)?;
            }
            Source::Embedded { name, text } => {
                files.push(name.to_string());
                conf.add_str(name, text)?;
            }
        }
        Ok(conf)
    }
}

/// Reads every source before judging any, so that all errors come out together.
fn load(
    capacity_scheduler: Source,
    preemptor_site: Option<Source>,
    yarn_site: Option<Source>,
    env: Env,
) -> Result<LoadedConfig, ConfigErrors> {
    let mut all = ConfigErrors::default();
    let mut files = Vec::new();
    let mut read = |source: &Source, all: &mut ConfigErrors| match source.read(&env, &mut files) {
        Ok(conf) => {
            all.warnings.extend_from_slice(conf.warnings());
            Some(conf)
        }
        Err(e) => {
            all.errors.push(e);
            None
        }
    };
    let cs = read(&capacity_scheduler, &mut all);
    let ps = preemptor_site.as_ref().map(|s| read(s, &mut all));
    let ys = yarn_site.as_ref().and_then(|s| read(s, &mut all));

    let queues = cs.and_then(|conf| match QueueTree::from_conf(&conf) {
        Ok(mut tree) => {
            all.warnings.append(&mut tree.warnings);
            Some(tree)
        }
        Err(e) => {
            all.extend(e);
            None
        }
    });
    let settings = match &ps {
        None => Some(PreemptorSettings::default()),
        Some(None) => None,
        Some(Some(conf)) => match PreemptorSettings::from_conf_with_warnings(conf) {
            Ok((s, mut w)) => {
                all.warnings.append(&mut w);
                Some(s)
            }
            Err(e) => {
                all.extend(e);
                None
            }
        },
    };
    if let Some(conf) = &ys {
        check_yarn_site(conf, &mut all.warnings);
    }
    if let (Some(tree), Some(s), Some(Some(conf))) = (&queues, &settings, &ps) {
        check_routes(tree, s, conf, &mut all.errors);
    }
    match (queues, settings) {
        (Some(queues), Some(settings)) if all.errors.is_empty() => {
            error::sort_by_location(&mut all.warnings, ConfigWarning::location);
            Ok(LoadedConfig {
                queues,
                settings,
                warnings: all.warnings,
                files,
            })
        }
        _ => {
            all.sort();
            Err(all)
        }
    }
}

/// Every proxy route must lead to a leaf queue, where applications can run.
fn check_routes(
    tree: &QueueTree,
    settings: &PreemptorSettings,
    conf: &Configuration,
    errors: &mut Vec<ConfigError>,
) {
    const KEY: &str = "yarn.preemptor.proxy.routes";
    for route in &settings.controller.routes {
        if !tree.find(&route.queue).is_some_and(QueueConfig::is_leaf) {
            errors.push(ConfigError::InvalidValue {
                key: KEY.to_string(),
                value: conf.get_raw(KEY).unwrap_or_default().to_string(),
                expected: format!(
                    "route target {:?} is not a leaf queue of capacity-scheduler.xml (give a leaf's name or full path)",
                    route.queue
                ),
                location: conf.location(KEY).cloned(),
            });
        }
    }
}

/// yarn-site.xml settings that would work against Preemptor. Raw values: yarn-site
/// often refers to core-site variables this reader does not load.
fn check_yarn_site(conf: &Configuration, warnings: &mut Vec<ConfigWarning>) {
    let mut note = |key: &str, message: &str| {
        warnings.push(ConfigWarning::Note {
            key: key.to_string(),
            location: conf.location(key).cloned(),
            message: message.to_string(),
        });
    };
    const MONITOR: &str = "yarn.resourcemanager.scheduler.monitor.enable";
    if conf
        .get_raw(MONITOR)
        .is_some_and(|v| parse_bool(v) == Ok(true))
    {
        note(
            MONITOR,
            "YARN's own preemption monitor is on and will kill containers Preemptor manages; set it to false",
        );
    }
    const SCHEDULER: &str = "yarn.resourcemanager.scheduler.class";
    if let Some(class) = conf.get_raw(SCHEDULER)
        && class.trim() != CAPACITY_SCHEDULER_CLASS
    {
        note(
            SCHEDULER,
            "the RM does not use the CapacityScheduler, so capacity-scheduler.xml (and Preemptor's queue model) does not describe it",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{JobClass, PolicyKind};
    use std::collections::HashMap;

    fn write(dir: &Path, name: &str, text: &str) {
        std::fs::write(dir.join(name), text).unwrap();
    }

    fn shipped(name: &str) -> String {
        std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("hadoop-conf")
                .join(name),
        )
        .unwrap()
    }

    #[test]
    fn the_shipped_example_parses_and_validates() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("hadoop-conf");
        let c = load_dir_with_env(&dir, Env::Fixed(HashMap::new())).unwrap();
        assert!(c.warnings.is_empty(), "{:#?}", c.warnings);
        assert_eq!(c.files.len(), 3);
        let q = &c.queues;
        let paths: Vec<&str> = q.queues.iter().map(|q| q.path.as_str()).collect();
        assert_eq!(paths, ["root", "root.short", "root.long"]);
        let short = q.find("short").unwrap();
        assert_eq!(short.capacities.absolute_capacity, Some(0.95));
        assert_eq!(short.capacities.absolute_maximum_capacity, Some(1.0));
        assert_eq!(short.job_class, Some(JobClass::Short));
        assert!(short.preemption_disabled);
        let long = q.find("long").unwrap();
        assert!((long.capacities.absolute_capacity.unwrap() - 0.05).abs() < 1e-12);
        assert_eq!(long.job_class, Some(JobClass::Long));
        assert!(!long.preemption_disabled);
        assert_eq!(q.resource_calculator, queues::DOMINANT_RESOURCE_CALCULATOR);
        // preemptor-site.xml lists every key at its default.
        assert_eq!(c.settings, PreemptorSettings::default());
        assert_eq!(c.settings.policy.kind, PolicyKind::Graceful);
    }

    #[test]
    fn the_shipped_site_file_and_docs_cover_every_key() {
        let site = shipped(PREEMPTOR_SITE_XML);
        let docs = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/configuration.md"),
        )
        .unwrap();
        for key in PreemptorSettings::known_keys() {
            assert!(
                site.contains(&format!("<name>{key}</name>")),
                "{key} missing from hadoop-conf/preemptor-site.xml"
            );
            assert!(
                docs.contains(&format!("`{key}`")),
                "{key} missing from docs/configuration.md"
            );
        }
    }

    #[test]
    fn the_shipped_yarn_site_turns_yarn_preemption_off() {
        let mut c = Configuration::with_env(HashMap::new());
        c.add_str("yarn-site.xml", &shipped(YARN_SITE_XML)).unwrap();
        assert_eq!(
            c.get_raw("yarn.resourcemanager.scheduler.monitor.enable"),
            Some("false")
        );
        assert_eq!(
            c.get_raw("yarn.nodemanager.container-executor.class"),
            Some("org.apache.hadoop.yarn.server.nodemanager.LinuxContainerExecutor")
        );
        assert_eq!(
            c.get_raw("yarn.nodemanager.linux-container-executor.cgroups.hierarchy"),
            Some("/hadoop-yarn")
        );
        assert!(
            c.get_raw("yarn.nodemanager.runtime.linux.allowed-runtimes")
                .unwrap()
                .contains("docker")
        );
        let mut w = Vec::new();
        check_yarn_site(&c, &mut w);
        assert!(w.is_empty(), "{w:?}");
    }

    #[test]
    fn the_embedded_default_matches_the_files() {
        let c = load_embedded_default().unwrap();
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("hadoop-conf");
        let d = load_dir_with_env(&dir, Env::Fixed(HashMap::new())).unwrap();
        assert_eq!(c.settings, d.settings);
        assert_eq!(c.queues.queues.len(), d.queues.queues.len());
        assert!(c.files[0].starts_with("embedded:"));
    }

    #[test]
    fn preemptor_site_is_optional_but_capacity_scheduler_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let e = load_dir(dir.path()).unwrap_err();
        assert!(
            matches!(e.errors[..], [ConfigError::MissingFile { .. }]),
            "{e}"
        );
        let e = load_dir(&dir.path().join("absent")).unwrap_err();
        assert!(e.to_string().contains("configuration directory"), "{e}");
        write(
            dir.path(),
            CAPACITY_SCHEDULER_XML,
            &shipped(CAPACITY_SCHEDULER_XML),
        );
        let c = load_dir(dir.path()).unwrap();
        assert_eq!(c.settings, PreemptorSettings::default());
        assert_eq!(c.files.len(), 1);
        // Something that is there but no file is an error, not a file to do without.
        std::fs::create_dir(dir.path().join(PREEMPTOR_SITE_XML)).unwrap();
        std::os::unix::fs::symlink("absent", dir.path().join(YARN_SITE_XML)).unwrap();
        let e = load_dir(dir.path()).unwrap_err();
        assert!(
            matches!(e.errors[..], [ConfigError::NotAFile { .. }]),
            "{e}"
        );
        assert!(
            e.to_string()
                .contains("preemptor-site.xml: not a regular file"),
            "{e}"
        );
        std::fs::remove_dir(dir.path().join(PREEMPTOR_SITE_XML)).unwrap();
        let e = load_dir(dir.path()).unwrap_err();
        assert!(
            e.to_string().contains("yarn-site.xml: not a regular file"),
            "{e}"
        );
    }

    #[test]
    fn errors_from_every_file_come_out_together() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            CAPACITY_SCHEDULER_XML,
            "<configuration>\n\
             <property><name>yarn.scheduler.capacity.root.queues</name><value>a,b</value></property>\n\
             <property><name>yarn.scheduler.capacity.root.a.capacity</name><value>70</value></property>\n\
             <property><name>yarn.scheduler.capacity.root.b.capacity</name><value>20</value></property>\n\
             </configuration>",
        );
        write(
            dir.path(),
            PREEMPTOR_SITE_XML,
            "<configuration>\n\
             <property><name>yarn.preemptor.policy</name><value>nope</value></property>\n\
             <property><name>yarn.preemptor.polcy</name><value>kill</value></property>\n\
             </configuration>",
        );
        write(
            dir.path(),
            YARN_SITE_XML,
            "<configuration>\n\
             <property><name>yarn.resourcemanager.scheduler.monitor.enable</name><value>true</value></property>\n\
             </configuration>",
        );
        let e = load_dir(dir.path()).unwrap_err();
        let errors: Vec<String> = e.errors.iter().map(ToString::to_string).collect();
        assert_eq!(errors.len(), 2, "{errors:#?}");
        assert!(
            errors[0].contains("capacity-scheduler.xml:3:") && errors[0].contains("sum to 90%"),
            "{errors:#?}"
        );
        assert!(
            errors[1].contains("preemptor-site.xml:2:") && errors[1].contains("unknown policy"),
            "{errors:#?}"
        );
        let warnings: Vec<String> = e.warnings.iter().map(ToString::to_string).collect();
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("did you mean yarn.preemptor.policy?")),
            "{warnings:#?}"
        );
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("preemption monitor is on")),
            "{warnings:#?}"
        );
    }

    #[test]
    fn routes_must_lead_to_leaf_queues() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            CAPACITY_SCHEDULER_XML,
            &shipped(CAPACITY_SCHEDULER_XML),
        );
        write(
            dir.path(),
            PREEMPTOR_SITE_XML,
            "<configuration>\n<property><name>yarn.preemptor.proxy.routes</name>\
             <value>tag:q=short,type:SPARK=root.long,tag:x=root,type:MAPREDUCE=batch</value></property>\n</configuration>",
        );
        let e = load_dir(dir.path()).unwrap_err();
        let errors: Vec<String> = e.errors.iter().map(ToString::to_string).collect();
        assert_eq!(errors.len(), 2, "{errors:#?}");
        assert!(
            errors[0].contains("\"root\" is not a leaf queue"),
            "{errors:#?}"
        );
        assert!(errors[1].contains("\"batch\""), "{errors:#?}");
    }
}
