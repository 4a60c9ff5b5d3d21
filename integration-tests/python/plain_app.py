"""Submits plain YARN applications (an AM command, no PREEMPTOR_WORKLOAD) to the emulated
RM with the third-party `yarn-api-client` and prints what every call returned as one JSON
object: one application is killed through the REST API, another one ends at its lifetime.

Usage: python3 plain_app.py RM_URL
"""

import json
import sys
import time

from yarn_api_client.resource_manager import ResourceManager

from polling import wait_for


def submit_plain(rm, name):
    app_id = rm.cluster_new_application().data["application-id"]
    rm.cluster_submit_application({
        "application-id": app_id,
        "application-name": name,
        "queue": "long",
        "am-container-spec": {
            "commands": {"command": "sleep 600"},
        },
        "resource": {"memory": 2048, "vCores": 2},
        "max-app-attempts": 1,
    })
    return app_id


def main():
    rm = ResourceManager(service_endpoints=[sys.argv[1]], timeout=10)
    out = {}

    app_id = submit_plain(rm, "plain-sleep")
    out["app_id"] = app_id
    out["running"] = wait_for(
        "the plain application to run its AM",
        lambda: rm.cluster_application(app_id).data["app"],
        lambda a: a["state"] == "RUNNING" and a["runningContainers"] == 1,
    )
    attempt = rm.cluster_application_attempts(app_id).data["appAttempts"]["appAttempt"][0]
    out["containers"] = rm.cluster_application_attempt_containers(
        app_id, attempt["appAttemptId"]).data
    out["timeouts"] = rm.cluster_application_timeouts(app_id).data
    # It idles: still RUNNING with only its AM a while later.
    time.sleep(1.0)
    out["still_running"] = rm.cluster_application(app_id).data["app"]
    out["kill_first"] = rm.cluster_application_kill(app_id).data
    out["killed"] = wait_for(
        "the plain application to be KILLED",
        lambda: rm.cluster_application(app_id).data["app"],
        lambda a: a["state"] == "KILLED",
    )

    timed = submit_plain(rm, "plain-lifetime")
    out["timed_id"] = timed
    wait_for(
        "the second plain application to run its AM",
        lambda: rm.cluster_application(timed).data["app"],
        lambda a: a["state"] == "RUNNING",
    )
    expiry = time.strftime("%Y-%m-%dT%H:%M:%S.000+0000", time.gmtime(time.time() + 2))
    out["lifetime_set"] = rm.cluster_update_application_timeout(timed, "LIFETIME", expiry).data
    out["lifetime"] = rm.cluster_application_timeout(timed, "LIFETIME").data
    out["expired"] = wait_for(
        "the second application to be killed at its lifetime",
        lambda: rm.cluster_application(timed).data["app"],
        lambda a: a["state"] == "KILLED",
        timeout=30.0,
    )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
