#!/usr/bin/env bash
# Captures the REST responses of a real Hadoop YARN cluster (deploy/hadoop/cluster.sh)
# as test fixtures: every endpoint Preemptor reads, in JSON and XML, byte for byte as
# served. See src/yarn/testdata/README.md ("hadoop-3.5.0/") for what each file holds.
#
#   deploy/hadoop/capture-fixtures.sh [OUT_DIR] [WORK_DIR]
#
# OUT_DIR defaults to src/yarn/testdata/hadoop-3.5.0, WORK_DIR to a new temporary dir.
# It starts a 2-node cluster (4096 MB, 4 vcores each) with the repository's
# hadoop-conf/capacity-scheduler.xml (queues root.short and root.long), runs a pi job to
# completion in queue short, fills the cluster with a SleepJob in queue long, captures,
# updates a node's resource and restores it, and stops the cluster (KEEP=1 leaves it
# running, with the SleepJob). About 3 minutes.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$SCRIPT_DIR/../.." && pwd)
OUT=${1:-$REPO_DIR/src/yarn/testdata/hadoop-3.5.0}
WORK=${2:-$(mktemp -d "${TMPDIR:-/tmp}/preemptor-fixtures.XXXXXX")}
CLUSTER="$SCRIPT_DIR/cluster.sh"
export PREEMPTOR_HADOOP_WORK_DIR="$WORK"

log() { printf 'capture: %s\n' "$*" >&2; }
[[ "${KEEP:-0}" == 1 ]] || trap '"$CLUSTER" down --work-dir "$WORK" || true' EXIT

mkdir -p "$OUT"
eval "$("$CLUSTER" up --work-dir "$WORK" --nodes 2 --node-memory-mb 4096 --node-vcores 4)"

# get PATH NAME: $OUT/NAME.json and $OUT/NAME.xml, as served.
get() {
  local fmt
  for fmt in json xml; do
    curl -sS -f -H "Accept: application/$fmt" -o "$OUT/$2.$fmt" "$3$1"
  done
}
rm_get() { get "$1" "$2" "$RM_WEBAPP"; }
# The first application id in a response.
app_id() { grep -o '"id" *: *"application_[0-9_]*"' | head -1 | cut -d'"' -f4; }

log "finished application: pi in queue short"
"$CLUSTER" hadoop jar "$HADOOP_EXAMPLES_JAR" pi -Dmapreduce.job.queuename=short 2 10 \
  >"$WORK/pi.out" 2>&1
finished=$(curl -sS -H 'Accept: application/json' "$RM_WEBAPP/ws/v1/cluster/apps?states=FINISHED" | app_id)

log "running application: SleepJob in queue long, more maps than the cluster has vcores"
HADOOP_CLASSPATH="$HADOOP_TESTS_JAR" setsid "$CLUSTER" hadoop \
  org.apache.hadoop.mapreduce.SleepJob -Dmapreduce.job.queuename=long \
  -m 12 -r 1 -mt 600000 -rt 1000 >"$WORK/sleep.out" 2>&1 &
running=""
for _ in $(seq 1 240); do
  metrics=$(curl -sS -H 'Accept: application/json' "$RM_WEBAPP/ws/v1/cluster/metrics")
  if grep -q '"availableVirtualCores" *: *0[,}]' <<<"$metrics"; then
    running=$(curl -sS -H 'Accept: application/json' "$RM_WEBAPP/ws/v1/cluster/apps?states=RUNNING" | app_id)
    [[ -n "$running" ]] && break
  fi
  sleep 1
done
[[ -n "$running" ]] || {
  tail -20 "$WORK/sleep.out" >&2
  exit 1
}
sleep 3
log "cluster full: $running"

attempt=$(curl -sS -H 'Accept: application/json' "$RM_WEBAPP/ws/v1/cluster/apps/$running/appattempts" |
  grep -o '"appAttemptId" *: *"[^"]*"' | head -1 | cut -d'"' -f4)
node=$(curl -sS -H 'Accept: application/json' "$RM_WEBAPP/ws/v1/cluster/nodes" |
  grep -o '"id" *: *"[^"]*"' | head -1 | cut -d'"' -f4)
nm_webapp=${NM_WEBAPPS%%,*}

rm_get /ws/v1/cluster/info cluster-info
rm_get /ws/v1/cluster/metrics cluster-metrics
rm_get /ws/v1/cluster/scheduler scheduler-capacity
rm_get /ws/v1/cluster/apps apps
rm_get "/ws/v1/cluster/apps/$running" app
rm_get "/ws/v1/cluster/apps/$finished" app-finished
rm_get "/ws/v1/cluster/apps/$running/appattempts" appattempts
rm_get "/ws/v1/cluster/apps/$running/appattempts/$attempt/containers" appattempt-containers
rm_get /ws/v1/cluster/nodes nodes
rm_get "/ws/v1/cluster/nodes/$node" node
rm_get /ws/v1/cluster/get-node-labels node-labels
rm_get /ws/v1/cluster/get-node-to-labels node-to-labels
get /ws/v1/node/info nm-info "$nm_webapp"
get /ws/v1/node/containers nm-containers "$nm_webapp"

# 404: an application that does not exist (curl without -f: the body is the point).
for fmt in json xml; do
  curl -sS -H "Accept: application/$fmt" -o "$OUT/error-app-not-found.$fmt" \
    "$RM_WEBAPP/ws/v1/cluster/apps/application_0_0000"
done

# Node resource update: 4 -> 6 vcores (JSON), then back to 4 (XML).
printf '%s' '{"resource":{"memory":4096,"vCores":6},"overCommitTimeout":-1}' \
  >"$OUT/node-resource-request.json"
curl -sS -f -X POST -H 'Content-Type: application/json' -H 'Accept: application/json' \
  --data-binary "@$OUT/node-resource-request.json" -o "$OUT/node-resource-response.json" \
  "$RM_WEBAPP/ws/v1/cluster/nodes/$node/resource?user.name=$(id -un)"
sleep 2
rm_get "/ws/v1/cluster/nodes/$node" node-raised
printf '%s' '<?xml version="1.0" encoding="UTF-8" standalone="yes"?><resourceOption><resource><memory>4096</memory><vCores>4</vCores></resource><overCommitTimeout>-1</overCommitTimeout></resourceOption>' \
  >"$OUT/node-resource-request.xml"
curl -sS -f -X POST -H 'Content-Type: application/xml' -H 'Accept: application/xml' \
  --data-binary "@$OUT/node-resource-request.xml" -o "$OUT/node-resource-response.xml" \
  "$RM_WEBAPP/ws/v1/cluster/nodes/$node/resource?user.name=$(id -un)"

cat >"$OUT/CAPTURED" <<EOF
Captured by deploy/hadoop/capture-fixtures.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ)
Hadoop: $("$CLUSTER" hadoop version 2>/dev/null | head -1)
Java: $(java -version 2>&1 | head -1)
running application: $running (SleepJob, queue long), attempt $attempt
finished application: $finished (pi, queue short)
node: $node (raised to 6 vcores in node-raised.*, then restored to 4)
NodeManager: $nm_webapp
EOF
log "wrote $(find "$OUT" -type f | wc -l) files to $OUT"
