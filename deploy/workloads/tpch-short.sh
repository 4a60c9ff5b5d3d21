#!/usr/bin/env bash
# Submits bursts of Spark-SQL TPC-H queries (Q1, Q6) to YARN's short queue, tagged so that
# Preemptor (and its proxy routes) see them as short jobs. Run it from a Spark client host.
set -euo pipefail

usage() {
    cat <<'USAGE'
Usage: tpch-short.sh [options]

Submits BURSTS bursts of BURST_SIZE TPC-H queries, one burst every INTERVAL seconds, each
query a Spark application (spark-sql --master yarn) in QUEUE. Queries alternate Q1 and Q6
with TPC-H's validation parameters; the SQL is in deploy/workloads/tpch/. Prints one line
per finished query: its name, exit status and seconds from submission to end.

Options:
  --queue NAME        YARN queue (default: short)
  --database NAME     database holding the lineitem table (default: tpch)
  --lineitem PATH     read lineitem from the Parquet files at PATH (a file or directory,
                      e.g. from tpchgen-cli parquet --tables lineitem; hdfs://, file://
                      or a path of the default file system) through a temporary view,
                      instead of a table of --database: no metastore needed
  --bursts N          number of bursts (default: 5)
  --burst-size N      queries per burst (default: 3)
  --interval SECONDS  time between burst starts (default: 60)
  --executors N       executors per query (default: 2)
  --dry-run           print the spark-sql commands instead of running them
  -h, --help          this text

Environment: SPARK_SQL (default: spark-sql on PATH). Spark's own settings (spark.yarn.jars,
memory sizes, the catalog) come from its spark-defaults.conf ($SPARK_CONF_DIR); each query
prints its output to ${TMPDIR:-/tmp}/NAME.out.
USAGE
}

queue=short database=tpch lineitem= bursts=5 burst_size=3 interval=60 executors=2 dry_run=0
need_value() { [[ $# -ge 2 && -n $2 ]] || { echo "tpch-short.sh: $1 needs a value" >&2; exit 2; }; }
while [[ $# -gt 0 ]]; do
    case $1 in
        --queue) need_value "$@"; queue=$2; shift 2 ;;
        --database) need_value "$@"; database=$2; shift 2 ;;
        --lineitem) need_value "$@"; lineitem=$2; shift 2 ;;
        --bursts) need_value "$@"; bursts=$2; shift 2 ;;
        --burst-size) need_value "$@"; burst_size=$2; shift 2 ;;
        --interval) need_value "$@"; interval=$2; shift 2 ;;
        --executors) need_value "$@"; executors=$2; shift 2 ;;
        --dry-run) dry_run=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "tpch-short.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
for n in bursts burst_size interval executors; do
    [[ ${!n} =~ ^[0-9]+$ && ${!n} -gt 0 ]] || {
        echo "tpch-short.sh: --${n//_/-} must be a whole number above 0, not '${!n}'" >&2
        exit 2
    }
done
for n in queue database; do
    [[ ${!n} =~ ^[A-Za-z0-9_.-]+$ ]] || {
        echo "tpch-short.sh: --$n '${!n}' has characters YARN and Spark do not accept" >&2
        exit 2
    }
done
if [[ $lineitem == *[\'\\]* ]]; then
    echo "tpch-short.sh: --lineitem '$lineitem' has a quote or a backslash" >&2
    exit 2
fi

sql_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/tpch" && pwd)
spark_sql=${SPARK_SQL:-spark-sql}
if [[ $dry_run -eq 0 ]] && ! command -v "$spark_sql" >/dev/null; then
    echo "tpch-short.sh: $spark_sql not found; set SPARK_SQL or add Spark's bin/ to PATH" >&2
    exit 2
fi

# TPC-H's validation parameters (Q1: DELTA 90; Q6: 1994-01-01, 0.06, 24).
query_text() {
    local template
    template=$(<"$sql_dir/q$1.sql")
    case $1 in
        1) template=${template//'${delta}'/90} ;;
        6) template=${template//'${date}'/1994-01-01}
           template=${template//'${discount}'/0.06}
           template=${template//'${quantity}'/24} ;;
    esac
    if [[ $template == *'${'* ]]; then
        echo "tpch-short.sh: $sql_dir/q$1.sql has a parameter this script does not fill" >&2
        return 1
    fi
    if [[ -n $lineitem ]]; then
        printf "create temporary view lineitem using parquet options (path '%s');\n" "$lineitem"
    fi
    printf '%s\n' "$template" | grep -v '^--'
}

run_query() {
    local q=$1 name=$2 start status sql
    sql=$(query_text "$q") || exit 2
    local cmd=("$spark_sql" --master yarn --deploy-mode client --queue "$queue"
        --name "$name" --num-executors "$executors"
        --conf "spark.yarn.tags=preemptor.class=short,tpch=q$q")
    if [[ -z $lineitem ]]; then cmd+=(--database "$database"); fi
    cmd+=(-e "$sql")
    if [[ $dry_run -eq 1 ]]; then
        printf '%q ' "${cmd[@]}"
        echo
        return 0
    fi
    start=$(date +%s)
    status=0
    "${cmd[@]}" >"${TMPDIR:-/tmp}/$name.out" 2>&1 || status=$?
    echo "$name exit=$status seconds=$(( $(date +%s) - start ))"
    return $status
}

seq_no=0
pids=()
for ((b = 1; b <= bursts; b++)); do
    burst_start=$(date +%s)
    for ((i = 0; i < burst_size; i++)); do
        seq_no=$((seq_no + 1))
        q=$(( seq_no % 2 == 1 ? 1 : 6 ))
        if [[ $dry_run -eq 1 ]]; then
            run_query "$q" "tpch-q$q-$seq_no"
        else
            run_query "$q" "tpch-q$q-$seq_no" &
            pids+=($!)
        fi
    done
    if [[ $b -lt $bursts && $dry_run -eq 0 ]]; then
        sleep $(( interval - ($(date +%s) - burst_start) > 0 ? interval - ($(date +%s) - burst_start) : 0 ))
    fi
done
failed=0
for p in "${pids[@]+"${pids[@]}"}"; do wait "$p" || failed=1; done
exit $failed
