//! End-to-end tests against real components: the Docker daemon, cgroup files, and
//! third-party YARN clients. One test binary, one module per area.
//!
//! Docker-backed tests never skip silently: without a daemon they print why and pass
//! outside CI, and fail when `CI=true`.

mod agent_api;
mod agent_crash;
mod agent_host;
mod agent_limits;
mod agent_support;
mod check_config;
mod common;
mod compose;
mod controller_api;
mod controller_e2e;
mod controller_load;
mod dice_live;
mod docker_smoke;
mod docs_links;
mod emulator_docker;
mod emulator_fidelity;
mod emulator_remote;
mod emulator_rest;
mod emulator_support;
mod hadoop_real;
mod hadoop_secure;
mod hadoop_spark;
mod hadoop_support;
mod kdc_support;
mod metrics_files;
mod operator_scripts;
mod proxy;
mod rm_client;
mod security;
mod sim_analytic;
mod sim_cli;
mod sim_papers;
mod workload;
