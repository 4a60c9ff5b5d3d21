-- TPC-H Q1, pricing summary report (TPC-H 2.4.1). ${delta} is substituted by
-- tpch-short.sh (and by the DuckDB check in integration-tests/python/tpch_duckdb.py).
-- The charge is cast to a width every engine multiplies exactly.
select
    l_returnflag,
    l_linestatus,
    sum(l_quantity) as sum_qty,
    sum(l_extendedprice) as sum_base_price,
    sum(l_extendedprice * (1 - l_discount)) as sum_disc_price,
    sum(cast(l_extendedprice * (1 - l_discount) as decimal(18,4)) * (1 + l_tax)) as sum_charge,
    avg(l_quantity) as avg_qty,
    avg(l_extendedprice) as avg_price,
    avg(l_discount) as avg_disc,
    count(*) as count_order
from lineitem
where l_shipdate <= date '1998-12-01' - interval '${delta}' day
group by l_returnflag, l_linestatus
order by l_returnflag, l_linestatus
