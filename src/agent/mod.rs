//! The node agent: finds YARN's Docker containers and changes their cgroup limits.
pub mod cli;
