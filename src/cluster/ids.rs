//! YARN identifiers, parsed strictly.
//!
//! The agent decides whether it may touch a Docker container by whether its name parses
//! as a [`ContainerId`], so the parser rejects anything YARN would not print.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {kind} id {input:?}: {reason}")]
pub struct IdError {
    pub kind: &'static str,
    pub input: String,
    pub reason: &'static str,
}

fn id_err(kind: &'static str, input: &str, reason: &'static str) -> IdError {
    IdError {
        kind,
        input: input.chars().take(120).collect(),
        reason,
    }
}

/// `application_<clusterTimestamp>_<id>`
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ApplicationId {
    pub cluster_timestamp: u64,
    pub id: u32,
}

/// `appattempt_<clusterTimestamp>_<app>_<attempt>`
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ApplicationAttemptId {
    pub application: ApplicationId,
    pub attempt: u32,
}

/// `container_[e<epoch>_]<clusterTimestamp>_<app>_<attempt>_<n>`
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ContainerId {
    pub attempt: ApplicationAttemptId,
    pub epoch: u32,
    pub id: u64,
}

/// Two words instead of five: a view indexes every container by id on every tick. The
/// fields that vary within a cluster (application, attempt, epoch, number) go into the
/// first word; equal ids still hash equal.
impl std::hash::Hash for ContainerId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let app = self.attempt.application;
        state.write_u64(
            self.id
                ^ u64::from(app.id).rotate_right(24)
                ^ u64::from(self.attempt.attempt).rotate_right(12)
                ^ u64::from(self.epoch).rotate_right(18),
        );
        state.write_u64(app.cluster_timestamp);
    }
}

impl ApplicationId {
    pub const fn new(cluster_timestamp: u64, id: u32) -> Self {
        ApplicationId {
            cluster_timestamp,
            id,
        }
    }
}

impl ApplicationAttemptId {
    pub const fn new(application: ApplicationId, attempt: u32) -> Self {
        ApplicationAttemptId {
            application,
            attempt,
        }
    }
}

impl ContainerId {
    pub const fn new(attempt: ApplicationAttemptId, epoch: u32, id: u64) -> Self {
        ContainerId { attempt, epoch, id }
    }

    pub fn application(&self) -> ApplicationId {
        self.attempt.application
    }

    /// True for the first container of an attempt, which YARN always gives the
    /// ApplicationMaster.
    pub fn is_am(&self) -> bool {
        self.id == 1
    }
}

fn parse_num<T: FromStr>(kind: &'static str, input: &str, part: &str) -> Result<T, IdError> {
    if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
        return Err(id_err(kind, input, "expected a decimal number"));
    }
    part.parse()
        .map_err(|_| id_err(kind, input, "number out of range"))
}

impl FromStr for ApplicationId {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, IdError> {
        const K: &str = "application";
        let rest = s
            .strip_prefix("application_")
            .ok_or_else(|| id_err(K, s, "must start with application_"))?;
        let parts: Vec<&str> = rest.split('_').collect();
        if parts.len() != 2 {
            return Err(id_err(K, s, "expected application_<clusterTimestamp>_<id>"));
        }
        Ok(ApplicationId {
            cluster_timestamp: parse_num(K, s, parts[0])?,
            id: parse_num(K, s, parts[1])?,
        })
    }
}

impl FromStr for ApplicationAttemptId {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, IdError> {
        const K: &str = "application attempt";
        let rest = s
            .strip_prefix("appattempt_")
            .ok_or_else(|| id_err(K, s, "must start with appattempt_"))?;
        let parts: Vec<&str> = rest.split('_').collect();
        if parts.len() != 3 {
            return Err(id_err(
                K,
                s,
                "expected appattempt_<clusterTimestamp>_<app>_<attempt>",
            ));
        }
        Ok(ApplicationAttemptId {
            application: ApplicationId {
                cluster_timestamp: parse_num(K, s, parts[0])?,
                id: parse_num(K, s, parts[1])?,
            },
            attempt: parse_num(K, s, parts[2])?,
        })
    }
}

impl FromStr for ContainerId {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, IdError> {
        const K: &str = "container";
        let rest = s
            .strip_prefix("container_")
            .ok_or_else(|| id_err(K, s, "must start with container_"))?;
        let mut parts: Vec<&str> = rest.split('_').collect();
        let epoch = match parts.first() {
            Some(p) if p.starts_with('e') => {
                let e = parse_num(K, s, &p[1..])?;
                parts.remove(0);
                e
            }
            _ => 0,
        };
        if parts.len() != 4 {
            return Err(id_err(
                K,
                s,
                "expected container_[e<epoch>_]<clusterTimestamp>_<app>_<attempt>_<n>",
            ));
        }
        Ok(ContainerId {
            attempt: ApplicationAttemptId {
                application: ApplicationId {
                    cluster_timestamp: parse_num(K, s, parts[0])?,
                    id: parse_num(K, s, parts[1])?,
                },
                attempt: parse_num(K, s, parts[2])?,
            },
            epoch,
            id: parse_num(K, s, parts[3])?,
        })
    }
}

// Padding widths follow Hadoop's ApplicationId / ContainerId toString.
impl fmt::Display for ApplicationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "application_{}_{:04}", self.cluster_timestamp, self.id)
    }
}

impl fmt::Display for ApplicationAttemptId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "appattempt_{}_{:04}_{:06}",
            self.application.cluster_timestamp, self.application.id, self.attempt
        )
    }
}

impl fmt::Display for ContainerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("container_")?;
        if self.epoch > 0 {
            write!(f, "e{:02}_", self.epoch)?;
        }
        write!(
            f,
            "{}_{:04}_{:02}_{:06}",
            self.attempt.application.cluster_timestamp,
            self.attempt.application.id,
            self.attempt.attempt,
            self.id
        )
    }
}

macro_rules! string_serde {
    ($t:ty) => {
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

string_serde!(ApplicationId);
string_serde!(ApplicationAttemptId);
string_serde!(ContainerId);

/// A fast, non-cryptographic hasher for maps keyed by YARN ids (the Fx hash of rustc).
/// Ids come from the RM and our own agents, not from an adversary picking collisions, and
/// SipHash made the per-tick container index the most expensive part of building a view.
#[derive(Clone, Copy, Default)]
pub struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

/// `HashMap` keyed by YARN ids with [`IdHasher`].
pub type IdMap<K, V> = std::collections::HashMap<K, V, std::hash::BuildHasherDefault<IdHasher>>;

/// A NodeManager's id as the RM reports it: `host:port`. Shared, not copied: a policy
/// tick names nodes in thousands of actions and pending kills.
#[derive(Clone, Debug, PartialOrd, Ord)]
pub struct NodeId(Arc<str>);

/// Copies of one id compare without reading the text (`Arc<str>` compares bytes).
impl PartialEq for NodeId {
    fn eq(&self, other: &NodeId) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0 == other.0
    }
}

impl Eq for NodeId {}

/// By the text, as equality goes.
impl std::hash::Hash for NodeId {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.0.hash(h);
    }
}

impl Serialize for NodeId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for NodeId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(NodeId::new)
    }
}

impl NodeId {
    pub fn new(s: impl Into<String>) -> Self {
        NodeId(Arc::from(s.into()))
    }

    pub fn host(&self) -> &str {
        self.0.rsplit_once(':').map_or(&self.0, |(h, _)| h)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_ids_round_trip_with_and_without_epoch() {
        for s in [
            "container_1410901177871_0001_01_000005",
            "container_e17_1410901177871_0001_01_000005",
            "container_e01_1700000000000_12345_01_1234567",
        ] {
            let id: ContainerId = s.parse().unwrap();
            assert_eq!(id.to_string(), s);
        }
        let id: ContainerId = "container_e17_1410901177871_0001_01_000005"
            .parse()
            .unwrap();
        assert_eq!(id.epoch, 17);
        assert_eq!(id.id, 5);
        assert_eq!(
            id.application().to_string(),
            "application_1410901177871_0001"
        );
        assert_eq!(
            id.attempt.to_string(),
            "appattempt_1410901177871_0001_000001"
        );
    }

    #[test]
    fn non_yarn_names_are_rejected() {
        for s in [
            "",
            "postgres",
            "container_",
            "container_abc_0001_01_000001",
            "container_1410901177871_0001_01",
            "container_1410901177871_0001_01_000001_7",
            "container_e_1410901177871_0001_01_000001",
            "container_1410901177871_0001_01_+1",
            "xcontainer_1410901177871_0001_01_000001",
            "container_99999999999999999999999_0001_01_000001",
        ] {
            assert!(s.parse::<ContainerId>().is_err(), "{s:?} accepted");
        }
    }

    #[test]
    fn application_ids_parse() {
        let a: ApplicationId = "application_1326815542473_0001".parse().unwrap();
        assert_eq!(a, ApplicationId::new(1326815542473, 1));
        assert!(
            "application_1326815542473"
                .parse::<ApplicationId>()
                .is_err()
        );
        let at: ApplicationAttemptId = "appattempt_1326815542473_0001_000001".parse().unwrap();
        assert_eq!(at.attempt, 1);
    }

    #[test]
    fn serde_uses_the_string_form() {
        let id: ContainerId = "container_1410901177871_0001_01_000005".parse().unwrap();
        let j = serde_json::to_string(&id).unwrap();
        assert_eq!(j, "\"container_1410901177871_0001_01_000005\"");
        assert_eq!(serde_json::from_str::<ContainerId>(&j).unwrap(), id);
        assert!(serde_json::from_str::<ContainerId>("\"nope\"").is_err());
    }
}
