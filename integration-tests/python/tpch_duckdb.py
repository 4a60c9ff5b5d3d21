#!/usr/bin/env python3
"""Checks `preemptor-workload tpch` against an independent engine.

tpchgen-cli (PyPI) writes lineitem.tbl at the given scale, DuckDB (PyPI) loads it with
TPC-H's column types and runs Q1 and Q6 (the SQL files in deploy/workloads/tpch/) with the
substitution parameters the kernel says it used, and every printed value must equal
DuckDB's rounded to TPC-H's two decimals.
Exits 0 when all answers agree, 1 on any mismatch, 2 when a tool is missing.

Usage: tpch_duckdb.py --workload PATH [--scale 0.01] [--seeds 0 7] [--threads 2]
"""

import argparse
import datetime
import decimal
import re
import shutil
import string
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import duckdb
except ImportError:
    sys.exit(
        "tpch_duckdb.py: the duckdb module is missing; "
        "bash .ci/run installs it in .venv (or: pip install duckdb tpchgen-cli==4.0.0)"
    )

TWO_PLACES = decimal.Decimal("0.01")

LINEITEM_COLUMNS = {
    "l_orderkey": "BIGINT",
    "l_partkey": "BIGINT",
    "l_suppkey": "BIGINT",
    "l_linenumber": "INTEGER",
    "l_quantity": "DECIMAL(15,2)",
    "l_extendedprice": "DECIMAL(15,2)",
    "l_discount": "DECIMAL(15,2)",
    "l_tax": "DECIMAL(15,2)",
    "l_returnflag": "VARCHAR",
    "l_linestatus": "VARCHAR",
    "l_shipdate": "DATE",
    "l_commitdate": "DATE",
    "l_receiptdate": "DATE",
    "l_shipinstruct": "VARCHAR",
    "l_shipmode": "VARCHAR",
    "l_comment": "VARCHAR",
    # Every .tbl line ends with a separator.
    "l_trailing": "VARCHAR",
}

# The queries operators run on a real cluster (deploy/workloads/tpch/), so that this check
# covers the shipped SQL: TPC-H 2.4.1 and 2.4.6 with ${...} substitution parameters.
SQL_DIR = Path(__file__).resolve().parents[2] / "deploy" / "workloads" / "tpch"


def query_sql(query, **params):
    return string.Template((SQL_DIR / f"q{query}.sql").read_text()).substitute(params)


def two_places(value):
    """TPC-H's printed precision: round half away from zero to hundredths."""
    if isinstance(value, float):
        value = decimal.Decimal(repr(value))
    elif isinstance(value, int):
        return str(value)
    elif not isinstance(value, decimal.Decimal):
        raise TypeError(f"unexpected value {value!r} of type {type(value).__name__}")
    return str(value.quantize(TWO_PLACES, rounding=decimal.ROUND_HALF_UP))


def run_kernel(workload, query, scale, seed, threads):
    cmd = [
        workload, "tpch", "--query", str(query), "--scale", str(scale),
        "--seed", str(seed), "--threads", str(threads),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr}")
    out = {"rows": [], "cmd": " ".join(cmd)}
    for line in proc.stdout.splitlines():
        word, _, rest = line.partition(" ")
        if word == "parameters":
            out["parameters"] = dict(kv.split("=", 1) for kv in rest.split())
        elif word == "lineitem_rows":
            out["lineitem_rows"] = int(rest)
        elif word == "row":
            out["rows"].append(rest.split("|"))
        elif word == "checksum":
            if not re.fullmatch(r"[0-9a-f]{16}", rest):
                raise RuntimeError(f"malformed checksum line {line!r}")
            out["checksum"] = rest
    if not proc.stdout.splitlines()[-1].startswith("checksum "):
        raise RuntimeError("the last line is not the checksum")
    return out


def duckdb_answer(con, query, params):
    if query == 1:
        delta = int(params["delta"])
        rows = con.execute(query_sql(1, delta=delta)).fetchall()
    else:
        date = datetime.date.fromisoformat(params["date"])
        discount = decimal.Decimal(params["discount"])
        quantity = int(params["quantity"])
        rows = con.execute(
            query_sql(6, date=date.isoformat(), discount=discount, quantity=quantity)
        ).fetchall()
    return [[v if isinstance(v, str) else two_places(v) for v in row] for row in rows]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", required=True, help="path to preemptor-workload")
    ap.add_argument("--scale", default="0.01")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 7])
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    # A venv's scripts sit beside its interpreter, on PATH or not.
    tpchgen = shutil.which("tpchgen-cli", path=str(Path(sys.executable).parent)) or shutil.which(
        "tpchgen-cli"
    )
    if tpchgen is None:
        sys.exit(
            "tpch_duckdb.py: tpchgen-cli is not on PATH; "
            "bash .ci/run installs it in .venv (or: pip install duckdb tpchgen-cli==4.0.0)"
        )
    failures = 0
    with tempfile.TemporaryDirectory(prefix="preemptor-tpch-") as tmp:
        gen = subprocess.run(
            [tpchgen, "tbl", "--scale-factor", args.scale, "--tables", "lineitem",
             "--output-dir", tmp],
            capture_output=True, text=True, timeout=600,
        )
        if gen.returncode != 0:
            sys.exit(f"tpch_duckdb.py: tpchgen-cli failed ({gen.returncode}): {gen.stderr}")
        tbl = Path(tmp) / "lineitem.tbl"
        con = duckdb.connect()
        columns = ", ".join(f"'{k}': '{v}'" for k, v in LINEITEM_COLUMNS.items())
        con.execute(
            f"create table lineitem as select * from read_csv('{tbl}', delim='|', "
            f"header=false, auto_detect=false, columns={{{columns}}})"
        )
        (count,) = con.execute("select count(*) from lineitem").fetchone()
        print(f"duckdb {duckdb.__version__}: lineitem at scale {args.scale} has {count} rows")
        for seed in args.seeds:
            for query in (1, 6):
                ours = run_kernel(args.workload, query, args.scale, seed, args.threads)
                theirs = duckdb_answer(con, query, ours["parameters"])
                problems = []
                if ours["lineitem_rows"] != count:
                    problems.append(f"scanned {ours['lineitem_rows']} rows, DuckDB holds {count}")
                if ours["rows"] != theirs:
                    problems.append(f"kernel rows {ours['rows']}\n  duckdb rows {theirs}")
                verdict = "FAIL" if problems else "ok"
                print(f"{verdict} Q{query} seed {seed} {ours['parameters']}: {len(theirs)} rows")
                for p in problems:
                    print(f"  {ours['cmd']}: {p}")
                failures += bool(problems)
                if not problems:
                    for row in ours["rows"]:
                        print("  " + "|".join(row))
    if failures:
        print(f"{failures} answers differ from DuckDB")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
