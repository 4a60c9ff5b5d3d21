-- TPC-H Q6, forecasting revenue change (TPC-H 2.4.6). ${date}, ${discount} and
-- ${quantity} are substituted by tpch-short.sh (and by the DuckDB check in
-- integration-tests/python/tpch_duckdb.py).
select sum(l_extendedprice * l_discount) as revenue
from lineitem
where l_shipdate >= date '${date}'
    and l_shipdate < date '${date}' + interval '1' year
    and l_discount between ${discount} - 0.01 and ${discount} + 0.01
    and l_quantity < ${quantity}
