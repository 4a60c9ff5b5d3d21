#!/usr/bin/env python3
"""TPC-H Q1 in Spark SQL, on the master spark-submit gives it, against DuckDB on the same files.

A PySpark application: run it with spark-submit in client mode (the driver compares, so
it runs where the script is), for instance on YARN's short queue:

  spark-submit --master yarn --deploy-mode client --queue short \\
      deploy/workloads/tpch/q1_check.py --lineitem /data/tpch/lineitem.parquet

It reads lineitem from local Parquet files (tpchgen-cli parquet --tables lineitem writes
them; Spark reads them as file:// URIs, so on a cluster of several hosts they must be at
the same path on each, e.g. on NFS), runs deploy/workloads/tpch/q1.sql (the query
tpch-short.sh submits) with TPC-H's validation parameter DELTA=90 in Spark SQL and in
DuckDB (in the driver's Python), and compares every row:
  - the group keys (l_returnflag, l_linestatus), the sums and count_order exactly, as
    Python Decimals (both engines sum DECIMAL(15,2) columns exactly);
  - the averages within half a unit of Spark's last place plus 1e-9 relative: Spark's
    avg of a DECIMAL(15,2) is a DECIMAL(19,6) rounded half-up, DuckDB's is a DOUBLE.
Prints the task attempts Spark's status tracker counted ("spark tasks: N completed, M
failed"), both answers, then "Q1 spark == duckdb: N rows" and exits 0 when they agree;
exits 1 on any difference and 2 when pyspark or duckdb is missing.

Needs pyspark and duckdb in the driver's Python (pip install pyspark==4.3.0 duckdb).
"""

import argparse
import decimal
import string
import sys
import time
from pathlib import Path

try:
    import duckdb
    from pyspark.sql import SparkSession
except ImportError as e:
    print(f"q1_check.py: {e}; pip install pyspark==4.3.0 duckdb", file=sys.stderr)
    sys.exit(2)

KEYS = ("l_returnflag", "l_linestatus")
EXACT = ("sum_qty", "sum_base_price", "sum_disc_price", "sum_charge", "count_order")
AVERAGES = ("avg_qty", "avg_price", "avg_disc")
COLUMNS = KEYS + EXACT[:4] + AVERAGES + EXACT[4:]


def q1_sql(path, delta):
    template = string.Template(Path(path).read_text())
    return template.substitute(delta=delta)


def as_decimal(value):
    if isinstance(value, float):
        return decimal.Decimal(repr(value))
    return decimal.Decimal(value)


def differences(spark_rows, duck_rows):
    """Human-readable differences; empty when the answers agree."""
    if len(spark_rows) != len(duck_rows):
        return [f"spark has {len(spark_rows)} rows, duckdb {len(duck_rows)}"]
    problems = []
    for s, d in zip(spark_rows, duck_rows):
        where = f"group {s['l_returnflag']}|{s['l_linestatus']}"
        for col in KEYS:
            if s[col] != d[col]:
                problems.append(f"{where}: {col} spark {s[col]!r} duckdb {d[col]!r}")
        for col in EXACT:
            if as_decimal(s[col]) != as_decimal(d[col]):
                problems.append(f"{where}: {col} spark {s[col]} duckdb {d[col]}")
        for col in AVERAGES:
            sv, dv = as_decimal(s[col]), as_decimal(d[col])
            half_ulp = decimal.Decimal(1).scaleb(sv.as_tuple().exponent) / 2
            if abs(sv - dv) > half_ulp + abs(dv) * decimal.Decimal("1e-9"):
                problems.append(f"{where}: {col} spark {sv} duckdb {dv!r} (beyond {half_ulp})")
    return problems


def task_counts(sc):
    """Completed and failed task attempts of this application's stages, as Spark's status
    tracker reports them (failed: lost executors, killed containers, errors)."""
    tracker = sc.statusTracker()
    completed = failed = 0
    for job in tracker.getJobIdsForGroup(None):
        info = tracker.getJobInfo(job)
        for stage in info.stageIds if info else ():
            s = tracker.getStageInfo(stage)
            if s:
                completed += s.numCompletedTasks
                failed += s.numFailedTasks
    return completed, failed


def show(engine, rows):
    print(f"{engine}:")
    print("  " + "|".join(COLUMNS))
    for r in rows:
        print("  " + "|".join(str(r[c]) for c in COLUMNS))


def main():
    here = Path(__file__).resolve().parent
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lineitem", required=True,
                    help="Parquet file or directory of Parquet files holding lineitem")
    ap.add_argument("--delta", type=int, default=90, help="Q1's DELTA in days (default 90)")
    ap.add_argument("--sql", default=str(here / "q1.sql"),
                    help="the Q1 template (default: q1.sql beside this script)")
    ap.add_argument("--start-when", metavar="FILE",
                    help="wait until FILE exists before creating the SparkSession (the "
                         "YARN submission): the JVM and Python start beforehand")
    args = ap.parse_args()
    lineitem = Path(args.lineitem).resolve()
    if not lineitem.exists():
        print(f"q1_check.py: {lineitem} does not exist", file=sys.stderr)
        return 2
    sql = q1_sql(args.sql, args.delta)
    if args.start_when:
        while not Path(args.start_when).exists():
            time.sleep(0.1)

    spark = SparkSession.builder.getOrCreate()
    try:
        sc = spark.sparkContext
        print(f"spark {spark.version}: master {sc.master}, application {sc.applicationId}, "
              f"queue {sc.getConf().get('spark.yarn.queue', '-')}")
        spark.read.parquet(lineitem.as_uri()).createOrReplaceTempView("lineitem")
        spark_rows = [r.asDict() for r in spark.sql(sql).collect()]
        tasks, failed = task_counts(sc)
        print(f"spark tasks: {tasks} completed, {failed} failed")
    finally:
        spark.stop()

    con = duckdb.connect()
    source = f"{lineitem}/**/*.parquet" if lineitem.is_dir() else str(lineitem)
    quoted = source.replace("'", "''")
    con.execute(f"create view lineitem as select * from read_parquet('{quoted}')")
    cur = con.execute(sql)
    names = [c[0] for c in cur.description]
    duck_rows = [dict(zip(names, row)) for row in cur.fetchall()]
    print(f"duckdb {duckdb.__version__}: the same query over {source}")

    show("spark", spark_rows)
    show("duckdb", duck_rows)
    problems = differences(spark_rows, duck_rows)
    if problems or not spark_rows:
        for p in problems or ["no rows"]:
            print(f"DIFFERENT {p}")
        return 1
    print(f"Q1 spark == duckdb: {len(spark_rows)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
