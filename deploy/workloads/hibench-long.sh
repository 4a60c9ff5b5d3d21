#!/usr/bin/env bash
# Runs HiBench workloads as long jobs in YARN's long queue, tagged so that Preemptor (and
# its adaptive policy, through the application type) treats them as long batch jobs.
# Run it on a HiBench client host where HiBench is built and conf/hadoop.conf (and, for
# the Spark workloads, conf/spark.conf) are set up as HiBench's own docs say.
set -euo pipefail

usage() {
    cat <<'USAGE'
Usage: hibench-long.sh --hibench DIR [options] WORKLOAD...

WORKLOAD: wordcount | terasort   (MapReduce: HiBench's hadoop/run.sh)
          kmeans | pagerank      (Spark: HiBench's spark/run.sh)

For each workload, in order: its prepare.sh (with --prepare), then its run.sh, with every
application going to QUEUE and carrying the tags preemptor.class=long and hibench=WORKLOAD.
MapReduce jobs get mapreduce.job.queuename and mapreduce.job.tags from an overlay copy of
the Hadoop configuration directory; Spark jobs get spark.yarn.queue and spark.yarn.tags.
Both reach HiBench through conf/zz-preemptor.conf, which HiBench reads last (it reads
conf/*.conf in name order, later keys winning). The file and the overlay are removed on
exit. HiBench's own conf files are not changed.

Options:
  --hibench DIR       HiBench's top directory (required)
  --queue NAME        YARN queue (default: long)
  --hadoop-conf DIR   Hadoop configuration to overlay (default: $HADOOP_CONF_DIR, else
                      /etc/hadoop/conf)
  --prepare           generate each workload's input first (HiBench's prepare.sh)
  --dry-run           print what would run and the settings, run nothing
  -h, --help          this text
USAGE
}

hibench='' queue=long hadoop_conf=${HADOOP_CONF_DIR:-/etc/hadoop/conf} prepare=0 dry_run=0
workloads=()
need_value() { [[ $# -ge 2 && -n $2 ]] || { echo "hibench-long.sh: $1 needs a value" >&2; exit 2; }; }
while [[ $# -gt 0 ]]; do
    case $1 in
        --hibench) need_value "$@"; hibench=$2; shift 2 ;;
        --queue) need_value "$@"; queue=$2; shift 2 ;;
        --hadoop-conf) need_value "$@"; hadoop_conf=$2; shift 2 ;;
        --prepare) prepare=1; shift ;;
        --dry-run) dry_run=1; shift ;;
        -h|--help) usage; exit 0 ;;
        -*) echo "hibench-long.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) workloads+=("$1"); shift ;;
    esac
done
[[ -n $hibench ]] || { echo "hibench-long.sh: --hibench DIR is required (see --help)" >&2; exit 2; }
[[ ${#workloads[@]} -gt 0 ]] || { echo "hibench-long.sh: name at least one workload (see --help)" >&2; exit 2; }
[[ -d $hibench/conf && -d $hibench/bin/workloads ]] || {
    echo "hibench-long.sh: $hibench is not a HiBench directory (no conf/ or bin/workloads/)" >&2
    exit 2
}
[[ -d $hadoop_conf ]] || {
    echo "hibench-long.sh: Hadoop configuration directory $hadoop_conf does not exist (--hadoop-conf)" >&2
    exit 2
}
[[ $queue =~ ^[A-Za-z0-9_.-]+$ ]] || {
    echo "hibench-long.sh: --queue '$queue' has characters YARN does not accept" >&2
    exit 2
}

# workload -> HiBench's path under bin/workloads and its framework directory.
path_of() {
    case $1 in
        wordcount) echo "micro/wordcount hadoop" ;;
        terasort) echo "micro/terasort hadoop" ;;
        kmeans) echo "ml/kmeans spark" ;;
        pagerank) echo "websearch/pagerank spark" ;;
        *) return 1 ;;
    esac
}
for w in "${workloads[@]}"; do
    path_of "$w" >/dev/null || {
        echo "hibench-long.sh: unknown workload '$w' (wordcount, terasort, kmeans or pagerank)" >&2
        exit 2
    }
done

zz=$hibench/conf/zz-preemptor.conf
if [[ -e $zz ]]; then
    echo "hibench-long.sh: $zz exists: another run is going on, or one was cut off; remove it first" >&2
    exit 2
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/preemptor-hibench.XXXXXX")
cleanup() { rm -f "$zz"; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# An overlay of the Hadoop configuration whose mapred-site.xml sends jobs to the queue
# with the tags; a property defined later in the same file overrides an earlier one.
overlay() {
    local dir=$work/hadoop-conf-$1 site tags="preemptor.class=long,hibench=$1"
    rm -rf "$dir"
    cp -R "$hadoop_conf/." "$dir"
    site=$dir/mapred-site.xml
    if [[ ! -f $site ]]; then
        printf '<?xml version="1.0"?>\n<configuration>\n</configuration>\n' >"$site"
    fi
    if ! grep -q '</configuration>' "$site"; then
        echo "hibench-long.sh: $hadoop_conf/mapred-site.xml has no </configuration>" >&2
        return 1
    fi
    local props="  <property><name>mapreduce.job.queuename</name><value>$queue</value></property>
  <property><name>mapreduce.job.tags</name><value>$tags</value></property>
</configuration>"
    local text
    text=$(<"$site")
    printf '%s\n' "${text%</configuration>*}$props" >"$site"
    echo "$dir"
}

status=0
for w in "${workloads[@]}"; do
    read -r path framework < <(path_of "$w")
    conf_dir=$(overlay "$w")
    cat >"$zz" <<CONF
# Written by Preemptor's hibench-long.sh for workload $w; removed when it exits.
hibench.hadoop.configure.dir $conf_dir
spark.yarn.queue $queue
spark.yarn.tags preemptor.class=long,hibench=$w
CONF
    steps=()
    [[ $prepare -eq 1 ]] && steps+=("$hibench/bin/workloads/$path/prepare/prepare.sh")
    steps+=("$hibench/bin/workloads/$path/$framework/run.sh")
    for step in "${steps[@]}"; do
        if [[ $dry_run -eq 1 ]]; then
            echo "$w: would run $step"
            continue
        fi
        [[ -x $step ]] || { echo "hibench-long.sh: $step is missing or not executable" >&2; exit 2; }
        echo "$w: running $step (queue $queue)"
        start=$(date +%s)
        if "$step"; then
            echo "$w: $(basename "$(dirname "$step")") done in $(( $(date +%s) - start )) s"
        else
            rc=$?
            echo "$w: $step failed with exit status $rc" >&2
            status=1
            break 2
        fi
    done
    if [[ $dry_run -eq 1 ]]; then
        sed 's/^/    /' "$zz"
    fi
done
exit $status
