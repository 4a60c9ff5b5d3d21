//! The workload image builds from scratch without a registry and runs to completion.

use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{CreateContainerOptions, WaitContainerOptions};
use futures_util::StreamExt;

use crate::common::{ContainerGuard, TestImage, docker_or_skip, unique_name};

#[tokio::test]
async fn workload_image_runs_a_burn_to_completion() {
    let Some(docker) = docker_or_skip("workload_image_runs_a_burn_to_completion").await else {
        return;
    };
    let image = TestImage::build(&docker, "preemptor-smoke").await;
    let name = unique_name("preemptor-smoke");
    let _guard = ContainerGuard {
        docker: docker.clone(),
        name: name.clone(),
    };
    let body = ContainerCreateBody {
        image: Some(image.tag.clone()),
        cmd: Some(vec![
            "burn".into(),
            "--iterations".into(),
            "3".into(),
            "--memory-mb".into(),
            "8".into(),
        ]),
        host_config: Some(HostConfig {
            memory: Some(64 * 1024 * 1024),
            ..Default::default()
        }),
        ..Default::default()
    };
    docker
        .create_container(
            Some(CreateContainerOptions {
                name: Some(name.clone()),
                ..Default::default()
            }),
            body,
        )
        .await
        .expect("create");
    docker.start_container(&name, None).await.expect("start");
    let mut wait = docker.wait_container(&name, None::<WaitContainerOptions>);
    let exit = wait.next().await.expect("wait result").expect("wait ok");
    assert_eq!(exit.status_code, 0);
}
