"""docker-compose.yml's owner boots, as written, without Docker.

The owner service's exact argv (the compose `entrypoint` and `command`, falling back to the Dockerfile's
ENTRYPOINT and CMD as Docker does) runs with its exact environment (the Dockerfile's ENV, then the
compose `environment`, `${VAR:-default}` interpolated from the test's own variables, as compose does). What
cannot exist here is stood in for, and only that:

* `postgres:5432` -> a fresh database on the local PostgreSQL (COMMIT_OWNER_DATABASE_URL);
* `minio:9000` -> a moto S3 server on 127.0.0.1 (COMMIT_OWNER_S3_ENDPOINT_URL), with the bucket that the
  `create-bucket` service makes;
* `0.0.0.0:8080` -> 127.0.0.1 and a free port (COMMIT_OWNER_HOST/PORT; machines here bind loopback only);
* `commit-owner` is the one in this virtualenv (PATH), the image's working directory a temporary one.

Then it commits to `s3://warehouse/...` with the bootstrap admin token and reads the table with delta-rs.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy.engine import make_url

from client import CommitOwnerClient
from coordinator.security.tokens import split_token
from coordinator.store.engine import check_database_url
from tests.conftest import MotoServer
from tests.support import ROOT, free_port, wait_http


def dockerfile() -> tuple[dict[str, str], list[str], list[str]]:
    """(ENV, ENTRYPOINT, CMD) of the final stage of the Dockerfile."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    final = text[text.rindex("\nFROM "):]
    env: dict[str, str] = {}
    entrypoint: list[str] = []
    cmd: list[str] = []
    for line in final.splitlines():
        word, _, rest = line.strip().partition(" ")
        if word == "ENV":
            for item in shlex.split(rest):
                key, _, value = item.partition("=")
                env[key] = value
        elif word == "ENTRYPOINT":
            entrypoint = json.loads(rest)
        elif word == "CMD":
            cmd = json.loads(rest)
    return env, entrypoint, cmd


def interpolate(value: str, variables: dict[str, str]) -> str:
    """Compose's `${VAR}`, `${VAR:-default}` and `${VAR:?message}`."""

    def one(m: re.Match[str]) -> str:
        name, op, arg = m.group(1), m.group(2), m.group(3) or ""
        got = variables.get(name, "")
        if op == ":?" and not got:
            raise AssertionError(f"compose would refuse to start: {name} {arg}")
        return got or (arg if op == ":-" else "")

    return re.sub(r"\$\{(\w+)(?:(:-|:\?)([^}]*))?\}", one, value)


def compose_file() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def service_process(name: str, variables: dict[str, str]) -> tuple[list[str], dict[str, str], dict[str, Any]]:
    """argv and environment of a compose service built from the Dockerfile, exactly as written (no stand-ins
    yet), with the service's own record."""
    service = compose_file()["services"][name]
    env, entrypoint, cmd = dockerfile()
    if "entrypoint" in service:  # compose's entrypoint replaces the image's, and drops the image's CMD
        entrypoint, cmd = service["entrypoint"], []
    if "command" in service:
        cmd = service["command"] if isinstance(service["command"], list) else shlex.split(service["command"])
    environment = service.get("environment") or {}
    if isinstance(environment, list):
        environment = dict(item.split("=", 1) for item in environment)
    env.update({k: interpolate(str(v), variables) for k, v in environment.items()})
    return [interpolate(str(word), variables) for word in [*entrypoint, *cmd]], env, service


def owner_process(variables: dict[str, str]) -> tuple[list[str], dict[str, str], dict[str, Any]]:
    """argv and environment of the compose owner service, exactly as written (no stand-ins yet)."""
    return service_process("owner", variables)


# -- the rules every service of the compose file keeps ------------------------------------------------------

# How many numeric parts an exact version of each image has (postgres: major.minor; python: 3.11.11).
VERSION_PARTS = {"postgres": 2, "python": 3}
MINIO_RELEASE = re.compile(r"^RELEASE\.\d{4}-\d\d-\d\dT\d\d-\d\d-\d\dZ$")


def pinned(image: str) -> bool:
    """Whether ``image`` names one exact version: a tag (never `latest`) whose version has every part."""
    name, _, tag = image.rpartition(":")
    if not name or "/" in tag:
        return False  # no tag at all: `latest` by default
    repo = name.rsplit("/", 1)[-1]
    if repo in ("minio", "mc"):
        return bool(MINIO_RELEASE.match(tag))
    version = re.match(r"^v?(\d+(?:\.\d+)*)(?:-[a-z0-9.-]+)?$", tag)  # etcd's tags: v3.5.17
    return bool(version) and version.group(1).count(".") + 1 >= VERSION_PARTS.get(repo, 3)


def test_every_image_is_pinned_to_an_exact_version() -> None:
    assert not pinned("postgres:16") and not pinned("minio/minio:latest") and not pinned("minio/mc")
    assert not pinned("python:3.11-slim") and pinned("python:3.11.11-slim-bookworm") and pinned("postgres:16.6")
    assert not pinned("quay.io/coreos/etcd:v3.5") and pinned("quay.io/coreos/etcd:v3.5.17")
    built = {s["image"]: s["build"] for s in compose_file()["services"].values() if "build" in s}
    # the images this file builds, from the Dockerfiles below (the Patroni node's for the `ha` profile)
    assert built == {"delta-commit-owner:local": ".", "delta-commit-owner-patroni:local": "docker/patroni"}
    pulled = [s["image"] for s in compose_file()["services"].values() if "build" not in s]
    assert len(pulled) == 4
    froms = [f for d in built.values() for f in re.findall(r"^FROM (\S+)", (ROOT / d / "Dockerfile").read_text(), re.M)]
    assert len(froms) == 3
    for image in [*pulled, *froms]:
        assert pinned(image), f"{image} is not pinned to an exact version"


def test_every_port_is_published_on_the_loopback_address_only() -> None:
    published = []
    for name, service in compose_file()["services"].items():
        for port in service.get("ports", []):
            if isinstance(port, dict):  # the long syntax
                assert port.get("host_ip") == "127.0.0.1", (name, port)
            else:
                assert re.fullmatch(r"127\.0\.0\.1:\d+:\d+", str(port)), (name, port)
            published.append(port)
        assert "network_mode" not in service, name  # `host` would publish everything on every address
    assert len(published) == 4  # the owner, MinIO's API and console, the `ha` profile's owner


def test_a_maintenance_worker_runs_beside_the_owner_with_its_settings() -> None:
    argv, env, service = service_process("maintain", {})
    assert argv == ["commit-owner", "maintain", "--every", "600"]
    assert service["restart"] == "unless-stopped" and service["image"] == compose_file()["services"]["owner"]["image"]
    assert service["depends_on"]["owner"]["condition"] == "service_healthy"
    _, owner_env, _ = owner_process({})
    for key in ("COMMIT_OWNER_DATABASE_URL", "COMMIT_OWNER_S3_ENDPOINT_URL", "COMMIT_OWNER_S3_REGION",
                "COMMIT_OWNER_S3_ACCESS_KEY_ID", "COMMIT_OWNER_S3_SECRET_ACCESS_KEY"):
        assert env[key] == owner_env[key], key  # the same database and bucket as the owner's
    assert service_process("maintain", {"MAINTAIN_EVERY_SECONDS": "60"})[0][-1] == "60"


def test_the_ha_profile_runs_three_patroni_nodes_with_the_tested_settings_and_an_owner_on_all_of_them() -> None:
    """docker-compose.yml's `ha` profile keeps the settings tests/reliability/test_patroni.py fails over."""
    services = compose_file()["services"]
    ha = sorted(name for name, s in services.items() if "ha" in s.get("profiles", []))
    assert ha == ["etcd", "maintain-ha", "owner-ha", "patroni1", "patroni2", "patroni3"]
    assert not [n for n, s in services.items() if n not in ha and s.get("profiles")]  # the rest starts by default
    nodes = {n: services[n] for n in ("patroni1", "patroni2", "patroni3")}
    for name, node in nodes.items():
        env = node["environment"]
        assert env["PATRONI_NAME"] == name and env["PATRONI_ETCD3_HOSTS"] == "etcd:2379"
        assert env["PATRONI_POSTGRESQL_CONNECT_ADDRESS"] == f"{name}:5432"
        assert env["PATRONI_RESTAPI_CONNECT_ADDRESS"] == f"{name}:8008"
        assert node["volumes"] == [f"{name}:/var/lib/postgresql/patroni"]  # a data folder each
        assert node["depends_on"]["etcd"]["condition"] == "service_healthy"
    conf = yaml.safe_load((ROOT / "docker" / "patroni" / "patroni.yml").read_text())
    dcs = conf["bootstrap"]["dcs"]
    assert dcs["synchronous_mode"] is True and dcs["synchronous_mode_strict"] is True
    assert dcs["primary_start_timeout"] == 0 and dcs["postgresql"]["use_pg_rewind"] is True
    assert dcs["loop_wait"] + 2 * dcs["retry_timeout"] <= dcs["ttl"]  # Patroni's own rule
    assert (ROOT / "docker" / "patroni" / conf["bootstrap"]["post_bootstrap"].rsplit("/", 1)[-1]).exists()

    argv, env, owner = service_process("owner-ha", {"OWNER_ADMIN_TOKEN": "x"})
    assert argv == owner_process({"OWNER_ADMIN_TOKEN": "x"})[0]  # migrate, import the token, serve: as `owner`
    url = env["COMMIT_OWNER_DATABASE_URL"]
    check_database_url(url)  # libpq's parser accepts every parameter
    q = make_url(url).query
    assert q["host"] == "patroni1,patroni2,patroni3" and q["target_session_attrs"] == "read-write"
    assert all(f"{n}" in owner["depends_on"] for n in nodes)
    # the owner answers (503, retryable) well inside a failover; a writer's default deadline outlasts one
    client_deadline = CommitOwnerClient("http://127.0.0.1:1").deadline
    failover = dcs["ttl"] + dcs["loop_wait"]
    assert float(env["COMMIT_OWNER_REQUEST_TIMEOUT_SECONDS"]) < dcs["ttl"]
    assert client_deadline > failover + float(env["COMMIT_OWNER_REQUEST_TIMEOUT_SECONDS"]) \
        + 3 * float(env["COMMIT_OWNER_DB_CONNECT_TIMEOUT_SECONDS"])
    # its tables are maintained, on the same store
    assert services["maintain-ha"]["environment"]["COMMIT_OWNER_DATABASE_URL"] == url


def test_each_owner_creates_managed_tables_under_its_own_roots_and_no_two_stores_share_a_path() -> None:
    """CREATE TABLE by name needs a managed location under an allowed root; two owners on two stores must
    never both own a path (each would think itself the table's only writer)."""
    from coordinator.security.roots import parse_root
    from coordinator.security.tokens import covers

    services = compose_file()["services"]
    roots = {}
    for name in ("owner", "owner-ha"):
        env = services[name]["environment"]
        allowed = [parse_root(r).uri for r in env["COMMIT_OWNER_ALLOW_LOCATION"].split(",")]
        managed = parse_root(env["COMMIT_OWNER_MANAGED_LOCATION"]).uri
        assert any(covers(r, managed) for r in allowed), (name, managed, allowed)
        roots[name] = allowed
    assert not [(a, b) for a in roots["owner"] for b in roots["owner-ha"] if covers(a, b) or covers(b, a)]


@pytest.fixture
def moto_minio(tmp_path: Path) -> Iterator[MotoServer]:
    server = MotoServer(tmp_path)
    server.start()
    yield server
    server.stop()


def test_the_compose_owner_without_an_admin_token_exits_with_a_clear_message(
        pg_database_factory: Any, moto_minio: MotoServer, tmp_path: Path) -> None:
    argv, env, _ = owner_process({})
    env.update(COMMIT_OWNER_DATABASE_URL=pg_database_factory(), COMMIT_OWNER_S3_ENDPOINT_URL=moto_minio.endpoint,
               COMMIT_OWNER_HOST="127.0.0.1", COMMIT_OWNER_PORT=str(free_port()),
               PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    res = subprocess.run(argv, env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=120)
    assert res.returncode == 2
    assert "environment variable OWNER_ADMIN_TOKEN does not hold a token" in res.stderr
    assert "it is empty or unset" in res.stderr


def test_the_compose_owner_boots_with_tokens_and_takes_commits_on_s3_warehouse(
        pg_database_factory: Any, moto_minio: MotoServer, tmp_path: Path) -> None:
    import boto3

    from client import CommitOwnerClient
    from client.contract.errors import UnauthenticatedError
    from coordinator.security.tokens import new_token
    from tests.support import ID_SCHEMA, next_ict

    token = new_token()[2]
    argv, env, owner = owner_process({"OWNER_ADMIN_TOKEN": token})
    assert env["COMMIT_OWNER_AUTH"] == "tokens"
    assert "s3://warehouse/" in env["COMMIT_OWNER_ALLOW_LOCATION"].split(",")
    assert env["COMMIT_OWNER_HOST"] == "0.0.0.0"
    for baked in ("docker-compose.yml", "Dockerfile"):  # no default secret in the image or the compose file
        assert "dco_" not in (ROOT / baked).read_text()

    # the stand-ins
    port = free_port()
    minio_key, minio_secret = env["COMMIT_OWNER_S3_ACCESS_KEY_ID"], env["COMMIT_OWNER_S3_SECRET_ACCESS_KEY"]
    boto3.client("s3", endpoint_url=moto_minio.endpoint, aws_access_key_id=minio_key,
                 aws_secret_access_key=minio_secret, region_name=env["COMMIT_OWNER_S3_REGION"]
                 ).create_bucket(Bucket="warehouse")
    env.update(COMMIT_OWNER_DATABASE_URL=pg_database_factory(), COMMIT_OWNER_S3_ENDPOINT_URL=moto_minio.endpoint,
               COMMIT_OWNER_HOST="127.0.0.1", COMMIT_OWNER_PORT=str(port),
               PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    log_path = tmp_path / "owner.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, env=env, cwd=str(tmp_path), stdout=log, stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_http(endpoint + "/readyz", timeout=60, proc=proc)
        except Exception as e:
            raise AssertionError(log_path.read_text()[-3000:]) from e
        # the compose health check, on the stand-in port
        check = [sys.executable if w == "python" else w.replace(":8080/", f":{port}/")
                 for w in owner["healthcheck"]["test"][1:]]
        assert subprocess.run(check, timeout=30).returncode == 0

        with pytest.raises(UnauthenticatedError):
            CommitOwnerClient(endpoint, deadline=10).list_tables()
        client = CommitOwnerClient(endpoint, token=token, deadline=30)
        options = {"key": minio_key, "secret": minio_secret,
                   "client_kwargs": {"endpoint_url": moto_minio.endpoint, "region_name": "us-east-1"}}
        # `docker compose exec owner commit-owner tables create ...`: the container's environment and the token
        created = subprocess.run(
            ["commit-owner", "tables", "create", "--location", "s3://warehouse/compose/t1", "--schema",
             json.dumps(ID_SCHEMA), "--endpoint", endpoint], env={**env, "COMMIT_OWNER_TOKEN": token},
            cwd=str(tmp_path), capture_output=True, text=True, timeout=120)
        assert created.returncode == 0, created.stderr
        table = client.get_table(location="s3://warehouse/compose/t1")
        import io

        import pyarrow as pa
        import pyarrow.parquet as pq
        import s3fs

        buf = io.BytesIO()
        pq.write_table(pa.table({"id": pa.array([1, 2, 3], pa.int64())}), buf)
        s3fs.S3FileSystem(**options, skip_instance_cache=True).pipe_file("warehouse/compose/t1/part-0.parquet",
                                                                         buf.getvalue())
        ict = next_ict()
        client.commit(table.table_id, 1, [
            {"commitInfo": {"inCommitTimestamp": ict, "operation": "WRITE"}},
            {"add": {"path": "part-0.parquet", "partitionValues": {}, "size": len(buf.getvalue()),
                     "modificationTime": ict, "dataChange": True}}])
        client.backfill_to_version(table.table_id, 1)

        import deltalake

        dt = deltalake.DeltaTable("s3://warehouse/compose/t1", storage_options={
            "AWS_ENDPOINT_URL": moto_minio.endpoint, "AWS_ACCESS_KEY_ID": minio_key,
            "AWS_SECRET_ACCESS_KEY": minio_secret, "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"})
        assert dt.version() == 1
        assert sorted(dt.to_pyarrow_table().column("id").to_pylist()) == [1, 2, 3]
    finally:
        proc.send_signal(signal.SIGTERM)  # the compose stop signal, through `exec` to the owner itself
        code = proc.wait(30)
    assert code == 0, log_path.read_text()[-3000:]
    text = log_path.read_text()
    parts = split_token(token)
    assert parts is not None, token
    assert parts[1] not in text  # the secret never reaches the log (it may hold "_" itself: split by the rule)
    assert "imported" in text

    # a restart (restart: unless-stopped) runs the same command over the same database: the import is a no-op
    with open(log_path, "wb") as log:
        again = subprocess.Popen(argv, env=env, cwd=str(tmp_path), stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_http(endpoint + "/readyz", timeout=60, proc=again)
        assert CommitOwnerClient(endpoint, token=token, deadline=10).list_tables()[0].location == table.location
    finally:
        again.send_signal(signal.SIGTERM)
        assert again.wait(30) == 0
    assert "already present" in log_path.read_text()



def test_the_compose_maintenance_worker_checkpoints_the_owners_tables_until_sigterm(
        pg_database_factory: Any, moto_minio: MotoServer, tmp_path: Path) -> None:
    """The owner and the `maintain` service as written, on one database and bucket (the stand-ins above):
    a table committed through the owner gets its checkpoint from the worker's passes, delta-rs opens it,
    and SIGTERM (compose's stop) ends the worker with exit 0."""
    import boto3
    import deltalake

    from client import CommitOwnerClient
    from client.contract.layout import checkpoint_file_names
    from coordinator.security.tokens import new_token
    from tests.support import ID_SCHEMA, next_ict, wait_until

    token = new_token()[2]
    argv, env, _ = owner_process({"OWNER_ADMIN_TOKEN": token})
    key, secret = env["COMMIT_OWNER_S3_ACCESS_KEY_ID"], env["COMMIT_OWNER_S3_SECRET_ACCESS_KEY"]
    s3 = boto3.client("s3", endpoint_url=moto_minio.endpoint, aws_access_key_id=key, aws_secret_access_key=secret,
                      region_name=env["COMMIT_OWNER_S3_REGION"])
    s3.create_bucket(Bucket="warehouse")
    port = free_port()
    stand_ins = {"COMMIT_OWNER_DATABASE_URL": pg_database_factory(), "COMMIT_OWNER_S3_ENDPOINT_URL": moto_minio.endpoint,
                 "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
                 # the code under test when it is not the installed one (a second checkout beside the venv's)
                 **{k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ}}
    env.update(stand_ins, COMMIT_OWNER_HOST="127.0.0.1", COMMIT_OWNER_PORT=str(port))
    endpoint = f"http://127.0.0.1:{port}"
    with open(tmp_path / "owner.log", "wb") as log:
        owner = subprocess.Popen(argv, env=env, cwd=str(tmp_path), stdout=log, stderr=subprocess.STDOUT)
    worker: subprocess.Popen[str] | None = None
    try:
        wait_http(endpoint + "/readyz", timeout=60, proc=owner)
        created = subprocess.run(
            ["commit-owner", "tables", "create", "--location", "s3://warehouse/compose/kept", "--schema",
             json.dumps(ID_SCHEMA), "--endpoint", endpoint], env={**env, "COMMIT_OWNER_TOKEN": token},
            cwd=str(tmp_path), capture_output=True, text=True, timeout=120)
        assert created.returncode == 0, created.stderr
        client = CommitOwnerClient(endpoint, token=token, deadline=30)
        table = client.get_table(location="s3://warehouse/compose/kept")
        for v in range(1, 13):
            client.commit(table.table_id, v, [{"commitInfo": {"inCommitTimestamp": next_ict(), "operation": "WRITE"}}])
        client.backfill_to_version(table.table_id, 12)

        # the worker, as compose runs it, one pass a second
        wargv, wenv, _ = service_process("maintain", {"MAINTAIN_EVERY_SECONDS": "1"})
        wenv.update(stand_ins)
        worker = subprocess.Popen(wargv, env=wenv, cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
        checkpoint = f"compose/kept/_delta_log/{checkpoint_file_names(10)[0]}"
        keys = lambda: {o["Key"] for o in s3.list_objects_v2(Bucket="warehouse").get("Contents", [])}  # noqa: E731
        wait_until(lambda: checkpoint in keys() or worker.poll() is not None, timeout=60, what="checkpoint 10")
        assert worker.poll() is None, worker.communicate()
        time.sleep(2.5)  # a second and a third pass: nothing more to write, the worker keeps running
        assert worker.poll() is None
    finally:
        if worker is not None and worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
        owner.send_signal(signal.SIGTERM)
        assert owner.wait(30) == 0
    assert worker is not None
    out, err = worker.communicate(timeout=30)
    assert worker.returncode == 0, err[-3000:]
    passes = [json.loads(line) for line in err.splitlines() if line.startswith('{"tables"')]
    assert len(passes) >= 2, err[-3000:]
    [first] = [p["tables"] for p in passes if p["checkpointsWritten"]]
    assert [(t["location"], t["written"]) for t in first] == [("s3://warehouse/compose/kept", [10])]
    assert all(p["failures"] == [] for p in passes)
    last = json.loads(s3.get_object(Bucket="warehouse", Key="compose/kept/_delta_log/_last_checkpoint")["Body"].read())
    assert last["version"] == 10
    dt = deltalake.DeltaTable("s3://warehouse/compose/kept", storage_options={
        "AWS_ENDPOINT_URL": moto_minio.endpoint, "AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret,
        "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"})
    assert dt.version() == 12
