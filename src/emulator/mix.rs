//! Drives [`HibenchTpchMix`] against an RM through its REST API, as any YARN client
//! would submit: new-application, then POST /apps.

use std::collections::HashMap;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::resources::Resource;
use crate::yarn::dto::{AppsResponse, NewApplication};

use super::workload::{HibenchTpchMix, Kernel, MIX_AM, MixJob};

#[derive(Clone, Debug)]
pub struct MixConfig {
    pub rm_url: String,
    pub cluster: Resource,
    pub long_queue: String,
    pub short_queue: String,
    pub seed: u64,
    pub burst_interval: Duration,
    pub burst_size: u32,
    pub user: String,
    /// How often the long jobs' demand is checked and topped up.
    pub tick: Duration,
    /// Long jobs' demand target, as a share of the cluster ([`HibenchTpchMix::long_fill`]).
    pub long_fill: f64,
    /// Largest long job as a share of the task slots ([`HibenchTpchMix::long_job_share`]).
    pub long_job_share: f64,
    /// TPC-H scale factor of the short queries ([`HibenchTpchMix::short_scale`]).
    pub short_scale: Option<f64>,
    /// Input-size factor of the long jobs ([`HibenchTpchMix::long_scale`]).
    pub long_scale: f64,
    /// HiBench kernels of the long jobs ([`HibenchTpchMix::long_kernels`]).
    pub long_kernels: Vec<Kernel>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MixStats {
    pub long_submitted: u64,
    pub short_submitted: u64,
    pub errors: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum MixError {
    #[error("request to {url} failed: {reason}")]
    Request { url: String, reason: String },
    #[error("{url} answered {status}: {body}")]
    Status {
        url: String,
        status: u16,
        body: String,
    },
}

struct Client {
    http: reqwest::Client,
    rm: String,
    user: String,
}

impl Client {
    async fn send(
        &self,
        req: reqwest::RequestBuilder,
        url: &str,
    ) -> Result<reqwest::Response, MixError> {
        let resp = req.send().await.map_err(|e| MixError::Request {
            url: url.to_string(),
            reason: e.to_string(),
        })?;
        let status = resp.status();
        if status.is_success() {
            Ok(resp)
        } else {
            Err(MixError::Status {
                url: url.to_string(),
                status: status.as_u16(),
                body: resp.text().await.unwrap_or_default(),
            })
        }
    }

    async fn json<T: serde::de::DeserializeOwned>(
        &self,
        req: reqwest::RequestBuilder,
        url: &str,
    ) -> Result<T, MixError> {
        self.send(req, url)
            .await?
            .json()
            .await
            .map_err(|e| MixError::Request {
                url: url.to_string(),
                reason: format!("unreadable response: {e}"),
            })
    }

    async fn submit(&self, job: &MixJob) -> Result<String, MixError> {
        let url = format!("{}/ws/v1/cluster/apps/new-application", self.rm);
        let new: NewApplication = self.json(self.http.post(&url), &url).await?;
        let ctx = job.spec.submission(
            &new.application_id,
            &job.name,
            &job.queue,
            job.tags.clone(),
            MIX_AM,
        );
        let url = format!("{}/ws/v1/cluster/apps", self.rm);
        let req = self
            .http
            .post(&url)
            .query(&[("user.name", self.user.as_str())])
            .json(&ctx);
        self.send(req, &url).await?;
        Ok(new.application_id)
    }

    async fn unfinished_long_apps(&self) -> Result<Vec<String>, MixError> {
        let url = format!("{}/ws/v1/cluster/apps", self.rm);
        let req = self.http.get(&url).query(&[
            ("states", "NEW,NEW_SAVING,SUBMITTED,ACCEPTED,RUNNING"),
            ("applicationTags", "preemptor.class=long"),
            ("deSelects", "resourceRequests"),
        ]);
        let apps: AppsResponse = self.json(req, &url).await?;
        Ok(apps.into_list().into_iter().map(|a| a.id).collect())
    }
}

/// Submits the mix until `cancel` fires. Long jobs are topped up every tick so that
/// their demand stays near the fill target; TPC-H bursts come every `burst_interval`.
pub async fn run(config: MixConfig, cancel: CancellationToken) -> Result<MixStats, MixError> {
    let client = Client {
        http: crate::tls::http_client_builder()
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| MixError::Request {
                url: config.rm_url.clone(),
                reason: e.to_string(),
            })?,
        rm: config.rm_url.trim_end_matches('/').to_string(),
        user: config.user.clone(),
    };
    let mut mix = HibenchTpchMix::new(
        config.cluster,
        &config.long_queue,
        &config.short_queue,
        config.seed,
    );
    mix.burst_size = config.burst_size;
    mix.long_fill = config.long_fill;
    mix.long_job_share = config.long_job_share;
    mix.short_scale = config.short_scale;
    mix.long_scale = config.long_scale;
    mix.long_kernels = config.long_kernels.clone();
    let mut stats = MixStats::default();
    // What each long job we submitted asks for in all (tasks + AM).
    let mut long_demand: HashMap<String, Resource> = HashMap::new();
    let mut tick = tokio::time::interval(config.tick);
    let mut next_burst = tokio::time::Instant::now() + config.burst_interval;
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return Ok(stats),
            _ = tick.tick() => {}
        }
        match client.unfinished_long_apps().await {
            Ok(ids) => {
                long_demand.retain(|id, _| ids.contains(id));
                let demand = long_demand.values().fold(Resource::ZERO, |a, r| a + *r);
                for job in mix.top_up(demand) {
                    match client.submit(&job).await {
                        Ok(id) => {
                            let total =
                                job.spec.task_resource().scale(job.spec.tasks as f64) + MIX_AM;
                            tracing::info!(app = %id, name = %job.name, queue = %job.queue, tasks = job.spec.tasks, "mix: long job submitted");
                            long_demand.insert(id, total);
                            stats.long_submitted += 1;
                        }
                        Err(e) => {
                            stats.errors += 1;
                            tracing::warn!(error = %e, "mix: submitting a long job");
                        }
                    }
                }
            }
            Err(e) => {
                stats.errors += 1;
                tracing::warn!(error = %e, "mix: reading the running long jobs");
            }
        }
        if tokio::time::Instant::now() >= next_burst {
            next_burst += config.burst_interval;
            for job in mix.burst() {
                match client.submit(&job).await {
                    Ok(id) => {
                        tracing::info!(app = %id, name = %job.name, queue = %job.queue, "mix: TPC-H query submitted");
                        stats.short_submitted += 1;
                    }
                    Err(e) => {
                        stats.errors += 1;
                        tracing::warn!(error = %e, "mix: submitting a TPC-H query");
                    }
                }
            }
        }
    }
}
