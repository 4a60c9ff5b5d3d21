"""Drives the emulated YARN with the third-party `yarn-api-client` (PyPI) and prints
what every call returned as one JSON object; the Rust test compares it with the
emulator's state.

Usage: python3 drive_emulator.py RM_URL
With PREEMPTOR_SPNEGO set, the RM is called with Kerberos (requests-gssapi).
"""

import json
import os
import sys

from yarn_api_client.node_manager import NodeManager
from yarn_api_client.resource_manager import ResourceManager

from polling import wait_for


def containers_of(rm, app_id, attempt_id):
    data = rm.cluster_application_attempt_containers(app_id, attempt_id).data
    return (data.get("containers") or {}).get("container") or []


def main():
    rm_url = sys.argv[1]
    out = {}
    auth = None
    if os.environ.get("PREEMPTOR_SPNEGO"):
        # The emulator's SPNEGO mode: Kerberos through requests-gssapi, with the ticket
        # in KRB5CCNAME; first a call without credentials, which must be refused.
        import requests
        from requests_gssapi import HTTPSPNEGOAuth

        out["unauthenticated_status"] = requests.get(rm_url + "/ws/v1/cluster/info", timeout=10).status_code
        auth = HTTPSPNEGOAuth()
    rm = ResourceManager(service_endpoints=[rm_url], timeout=10, auth=auth)
    out["info"] = rm.cluster_information().data
    out["metrics"] = rm.cluster_metrics().data
    out["scheduler"] = rm.cluster_scheduler().data

    new = rm.cluster_new_application().data
    out["new"] = new
    app_id = new["application-id"]
    workload = {
        "kernel": "burn",
        "args": ["--iterations", "1000"],
        "tasks": 2,
        "memoryMb": 1024,
        "vcores": 1,
        "simulatedDurationMs": 300000,
    }
    rm.cluster_submit_application({
        "application-id": app_id,
        "application-name": "yarn-api-client-check",
        "queue": "long",
        "am-container-spec": {
            "environment": {"entry": [{"key": "PREEMPTOR_WORKLOAD", "value": json.dumps(workload)}]},
            "commands": {"command": "unused by the emulator"},
        },
        "resource": {"memory": 1024, "vCores": 1},
        "application-type": "MAPREDUCE",
        "application-tags": {"tag": ["client-test"]},
        "max-app-attempts": 1,
    })
    out["app"] = wait_for(
        "the application to run its AM and 2 tasks",
        lambda: rm.cluster_application(app_id).data["app"],
        lambda a: a["state"] == "RUNNING" and a["runningContainers"] == 3,
    )
    out["apps_running"] = rm.cluster_applications(states=["RUNNING"], application_tags=["client-test"]).data
    out["apps_deselected"] = rm.cluster_applications(de_selects=["resourceRequests"]).data
    out["apps_other_queue"] = rm.cluster_applications(queue="short").data
    out["attempts"] = rm.cluster_application_attempts(app_id).data
    attempt_id = out["attempts"]["appAttempts"]["appAttempt"][0]["appAttemptId"]
    out["containers"] = rm.cluster_application_attempt_containers(app_id, attempt_id).data

    out["nodes"] = rm.cluster_nodes().data
    node_id = out["nodes"]["nodes"]["node"][0]["id"]
    out["node"] = rm.cluster_node(node_id).data
    out["node_update"] = rm.cluster_node_update_resource(
        node_id, {"resource": {"memory": 12288, "vCores": 12}, "overCommitTimeout": -1}
    ).data
    out["node_after_update"] = rm.cluster_node(node_id).data

    task = [c for c in out["containers"]["containers"]["container"]
            if not c["containerId"].endswith("_000001")][0]
    out["signalled"] = task["containerId"]
    out["signal"] = rm.cluster_container_signal(task["containerId"], "FORCEFUL_SHUTDOWN").data
    out["containers_after_signal"] = wait_for(
        "the killed task to be rerun in a new container",
        lambda: containers_of(rm, app_id, attempt_id),
        lambda cs: len(cs) == 3 and task["containerId"] not in [c["containerId"] for c in cs],
    )

    nm = NodeManager(service_endpoint=task["nodeHttpAddress"], timeout=10)
    out["nm_info"] = nm.node_information().data
    out["nm_containers"] = nm.node_containers().data
    first = out["nm_containers"]["containers"]["container"][0]["id"]
    out["nm_container"] = nm.node_container(first).data

    out["kill_first"] = rm.cluster_application_kill(app_id).data
    out["state_after_kill"] = wait_for(
        "the application to be KILLED",
        lambda: rm.cluster_application_state(app_id).data,
        lambda s: s["state"] == "KILLED",
    )
    out["kill_again"] = rm.cluster_application_kill(app_id).data
    out["final"] = rm.cluster_application(app_id).data
    print(json.dumps(out))


if __name__ == "__main__":
    main()
