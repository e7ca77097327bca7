"""The reliability harness: the world a run starts (services, moto, backends: world.py), the Jepsen-style
workload (workload.py), the checker (checker.py), fault glue (faults.py), a TCP proxy to cut S3 off
(netproxy.py) and a throwaway PostgreSQL cluster (pgcluster.py).

Used by the reliability tests and by scripts/chaos; not part of the wheel (docs/decisions.md).
"""
