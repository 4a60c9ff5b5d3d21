"""Submits applications through Preemptor's ResourceManager proxy with the third-party
`yarn-api-client` (PyPI) and prints what the RM reports for them as one JSON object.

Usage: python3 submit_via_proxy.py PROXY_URL
"""

import json
import sys

from yarn_api_client.resource_manager import ResourceManager

from drive_emulator import wait_for


def submit(rm, name, tags, queue=None):
    app_id = rm.cluster_new_application().data["application-id"]
    workload = {
        "kernel": "burn",
        "args": ["--iterations", "1000"],
        "tasks": 1,
        "memoryMb": 1024,
        "vcores": 1,
        "simulatedDurationMs": 300000,
    }
    context = {
        "application-id": app_id,
        "application-name": name,
        "am-container-spec": {
            "environment": {"entry": [{"key": "PREEMPTOR_WORKLOAD", "value": json.dumps(workload)}]},
            "commands": {"command": "unused by the emulator"},
        },
        "resource": {"memory": 1024, "vCores": 1},
        "application-type": "MAPREDUCE",
        "application-tags": {"tag": tags},
        "max-app-attempts": 1,
    }
    if queue is not None:
        context["queue"] = queue
    rm.cluster_submit_application(context)
    return app_id


def main():
    # The client checks /cluster (the web UI) through the proxy before anything else.
    rm = ResourceManager(service_endpoints=[sys.argv[1]], timeout=10)
    out = {}
    out["routed"] = submit(rm, "tpch-q1", ["tpch"])
    out["explicit"] = submit(rm, "tpch-etl", ["tpch"], queue="long")
    for key in ["routed", "explicit"]:
        out[key + "_app"] = wait_for(
            "%s to run" % out[key],
            lambda: rm.cluster_application(out[key]).data["app"],
            lambda a: a["state"] == "RUNNING",
        )
    out["scheduler"] = rm.cluster_scheduler().data
    print(json.dumps(out))


if __name__ == "__main__":
    main()
