"""A new user's first starts: a wrong database URL or missing S3, Azure or Google credentials is one line on
stderr, the documented exit code, and nothing left behind (no empty database file, no folder, nothing in the
bucket)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from harness.emulators import AzuriteServer, FakeGcsServer
from tests.conftest import MotoServer
from tests.ops.test_cli import cli
from tests.support import ROOT, S3_KEY, S3_SECRET, free_port, migrate, wait_http


def _one_line(res: subprocess.CompletedProcess[str]) -> str:
    """The whole of stderr, which must be one `error: ...` line (no traceback, no usage text)."""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert "Traceback" not in res.stderr and "Event loop is closed" not in res.stderr
    return lines[0]


def _rows(db: Path) -> list[str]:
    """Every schema object and row of a SQLite database (its header changes when opened in WAL mode)."""
    conn = sqlite3.connect(db)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize("command", [("serve", "--port", "1"), ("tables", "list"), ("tokens", "list")])
def test_a_sqlite_file_in_a_missing_folder_is_one_line_and_creates_nothing(tmp_path: Path,
                                                                           command: tuple[str, ...]) -> None:
    missing = tmp_path / "no" / "such" / "dir"
    res = cli(*command, "--database-url", f"sqlite+aiosqlite:///{missing}/x.db")
    assert res.returncode == 2
    line = _one_line(res)
    assert line == (f"error: cannot use the database: the folder {missing} of the SQLite file does not exist "
                    "(check the database URL; a new store there: `commit-owner migrate --create --database-url ...`)")
    assert _files(tmp_path) == []


@pytest.mark.parametrize("url", ["sqlite:///{d}/typo.db", "sqlite+aiosqlite:///{d}/typo.db"])
def test_a_sqlite_url_naming_no_database_leaves_no_empty_file(tmp_path: Path, url: str) -> None:
    res = cli("serve", "--port", "1", "--database-url", url.format(d=tmp_path))
    assert res.returncode == 3
    line = _one_line(res)
    assert f"no SQLite database at {tmp_path}/typo.db" in line and "commit-owner migrate" in line
    assert _files(tmp_path) == []


@pytest.mark.parametrize("url, says", [
    ("sqlite+aiosqlite://./owner.db", "a SQLite URL has no host: three slashes before a relative path"),
    ("sqlite:owner.db", "not a database URL: expected sqlite+aiosqlite:///"),
    ("mysql://root@localhost/owner", "the ownership store is SQLite or PostgreSQL, not mysql"),
    ("sqlite+aiosqlit:///./owner.db", "no database driver named 'sqlite+aiosqlit'"),
    ("postgresql+psycopgg://postgres@127.0.0.1/owner", "no database driver named 'postgresql+psycopgg'"),
])
def test_a_malformed_database_url_is_refused_before_anything_opens(tmp_path: Path, url: str, says: str) -> None:
    for command in (("serve", "--port", "1"), ("migrate",), ("tables", "list")):
        res = subprocess.run([sys.executable, "-m", "coordinator", *command, "--database-url", url],
                             cwd=str(tmp_path), capture_output=True, text=True, timeout=60,
                             env={k: v for k, v in os.environ.items() if not k.startswith("COMMIT_OWNER_")})
        assert res.returncode == 2, (command, res.stderr)
        line = _one_line(res)
        assert line.startswith("error: bad value for --database-url / COMMIT_OWNER_DATABASE_URL: ")
        assert says in line
        assert _files(tmp_path) == []  # the working directory: no ./owner.db, no ./. file


def test_migrate_creates_a_store_only_where_asked(tmp_path: Path) -> None:
    """A typo'd path (a folder that does not exist, or a file name) is one line, and no store: only
    `migrate --create`, or the default ./commit-owner.db of `make run`, makes a new one (issue 43)."""
    db = tmp_path / "new" / "owner.db"
    url = f"sqlite+aiosqlite:///{db}"
    res = cli("migrate", "--database-url", url)
    assert res.returncode == 2, res.stderr
    line = _one_line(res)
    assert f"the folder {tmp_path}/new of the SQLite file does not exist" in line
    assert "commit-owner migrate --create" in line
    res = cli("migrate", "--database-url", f"sqlite:///{tmp_path}/typo.db")  # the driver-less spelling too
    assert res.returncode == 3 and f"no SQLite database at {tmp_path}/typo.db" in _one_line(res)
    assert _files(tmp_path) == []
    res = cli("migrate", "--create", "--database-url", url)
    assert res.returncode == 0, res.stderr
    assert db.is_file() and db.stat().st_size > 0
    res = cli("tables", "list", "--json", "--database-url", url)
    assert res.returncode == 0 and res.stdout.strip() == "[]", res.stderr


# -- S3 without credentials ---------------------------------------------------------------------------------

def _no_aws_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a user who set no AWS credentials anywhere: none in the environment, no shared
    files, no instance metadata to ask."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "COMMIT_OWNER_"))}
    env.update(AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "no-credentials"), AWS_CONFIG_FILE=str(tmp_path / "no-config"),
               AWS_EC2_METADATA_DISABLED="true", HOME=str(tmp_path))
    env.update(extra)
    return env


def _bucket_keys(moto: MotoServer, bucket: str) -> list[str]:
    import boto3

    s3 = boto3.client("s3", endpoint_url=moto.endpoint, aws_access_key_id=S3_KEY, aws_secret_access_key=S3_SECRET,
                      region_name="us-east-1")
    return [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]


def test_serve_with_an_s3_root_and_no_credentials_is_one_line_naming_the_settings(
        tmp_path: Path, moto: MotoServer) -> None:
    bucket = moto.make_bucket()
    db = tmp_path / "owner.db"
    migrate(f"sqlite+aiosqlite:///{db}")
    before = _rows(db)
    argv = [sys.executable, "-m", "coordinator", "serve", "--database-url", f"sqlite+aiosqlite:///{db}",
            "--port", str(free_port()), "--allow-location", f"s3://{bucket}/tables",
            "--managed-location", f"s3://{bucket}/tables/managed", "--s3-endpoint-url", moto.endpoint]
    res = subprocess.run(argv, cwd=str(ROOT), capture_output=True, text=True, timeout=60, env=_no_aws_env(tmp_path))
    assert res.returncode == 2
    line = _one_line(res)
    assert line.startswith("error: s3:// tables are allowed here, but no S3 credentials: set "
                           "COMMIT_OWNER_S3_ACCESS_KEY_ID and COMMIT_OWNER_S3_SECRET_ACCESS_KEY")
    assert "listening" not in res.stdout + res.stderr
    assert _bucket_keys(moto, bucket) == []
    assert _rows(db) == before

    # The same start with the key in the owner's settings, or in the AWS environment, serves.
    for env in (_no_aws_env(tmp_path, COMMIT_OWNER_S3_ACCESS_KEY_ID=S3_KEY, COMMIT_OWNER_S3_SECRET_ACCESS_KEY=S3_SECRET),
                _no_aws_env(tmp_path, AWS_ACCESS_KEY_ID=S3_KEY, AWS_SECRET_ACCESS_KEY=S3_SECRET)):
        port = free_port()
        argv[argv.index("--port") + 1] = str(port)
        proc = subprocess.Popen(argv, cwd=str(ROOT), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        try:
            wait_http(f"http://127.0.0.1:{port}/healthz", proc=proc)
        finally:
            proc.terminate()
            assert proc.wait(30) == 0


def test_a_command_writing_to_s3_itself_without_credentials_is_one_line(tmp_path: Path, moto: MotoServer) -> None:
    """`tables create` writes version 0 through the client library: no botocore traceback either, and no
    owner was asked to register anything (none is running: the refusal comes before)."""
    bucket = moto.make_bucket()
    res = subprocess.run(
        [sys.executable, "-m", "coordinator", "tables", "create", "--location", f"s3://{bucket}/t1", "--schema",
         '{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}}]}',
         "--endpoint", f"http://127.0.0.1:{free_port()}", "--s3-endpoint-url", moto.endpoint],
        cwd=str(ROOT), capture_output=True, text=True, timeout=60, env=_no_aws_env(tmp_path))
    assert res.returncode == 2
    assert _one_line(res).startswith("error: no S3 credentials: set COMMIT_OWNER_S3_ACCESS_KEY_ID")
    assert _bucket_keys(moto, bucket) == []


# -- Azure and Google Cloud Storage without credentials ---------------------------------------------------------

def _no_cloud_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """No AWS, Azure or Google credentials anywhere: none in the environment, no gcloud folder in HOME."""
    env = {k: v for k, v in _no_aws_env(tmp_path).items() if not k.startswith(("AZURE_", "GOOGLE_", "CLOUDSDK_"))}
    env.update(CLOUDSDK_CONFIG=str(tmp_path / "no-gcloud"), NO_GCE_CHECK="True")
    env.update(extra)
    return env


def _serves(argv: list[str], env: dict[str, str]) -> None:
    port = free_port()
    argv = [*argv]
    argv[argv.index("--port") + 1] = str(port)
    proc = subprocess.Popen(argv, cwd=str(ROOT), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", proc=proc)
    finally:
        proc.terminate()
        assert proc.wait(30) == 0


def test_serve_with_an_azure_root_and_no_credentials_is_one_line_naming_the_settings(
        tmp_path: Path, azurite: AzuriteServer) -> None:
    container = azurite.make_container()
    root = f"abfss://{container}@{azurite.account}.dfs.core.windows.net/tables"
    db = tmp_path / "owner.db"
    migrate(f"sqlite+aiosqlite:///{db}")
    before = _rows(db)
    argv = [sys.executable, "-m", "coordinator", "serve", "--database-url", f"sqlite+aiosqlite:///{db}",
            "--port", str(free_port()), "--allow-location", root, "--managed-location", f"{root}/managed"]
    # an account named, nothing to sign with
    for env in (_no_cloud_env(tmp_path), _no_cloud_env(tmp_path, COMMIT_OWNER_AZURE_ACCOUNT_NAME=azurite.account,
                                                        COMMIT_OWNER_AZURE_ENDPOINT=azurite.endpoint)):
        res = subprocess.run(argv, cwd=str(ROOT), capture_output=True, text=True, timeout=60, env=env)
        assert res.returncode == 2
        line = _one_line(res)
        assert line.startswith("error: abfss:// tables are allowed here, but no Azure credentials: set "
                               "COMMIT_OWNER_AZURE_ACCOUNT_NAME with COMMIT_OWNER_AZURE_ACCOUNT_KEY"), line
        assert "COMMIT_OWNER_AZURE_CONNECTION_STRING" in line and "COMMIT_OWNER_AZURE_SAS_TOKEN" in line
        assert "listening" not in res.stdout + res.stderr
    assert _rows(db) == before
    from azure.storage.blob import ContainerClient

    with ContainerClient.from_connection_string(azurite.connection_string, container) as c:
        assert list(c.list_blobs()) == []

    # With the account's key, or a connection string, it serves.
    _serves(argv, _no_cloud_env(tmp_path, COMMIT_OWNER_AZURE_ACCOUNT_NAME=azurite.account,
                                COMMIT_OWNER_AZURE_ACCOUNT_KEY=azurite.key, COMMIT_OWNER_AZURE_ENDPOINT=azurite.endpoint))
    _serves(argv, _no_cloud_env(tmp_path, COMMIT_OWNER_AZURE_CONNECTION_STRING=azurite.connection_string))


def test_serve_with_a_gcs_root_and_no_credentials_is_one_line_naming_the_settings(
        tmp_path: Path, fake_gcs: FakeGcsServer) -> None:
    bucket = fake_gcs.make_bucket()
    db = tmp_path / "owner.db"
    migrate(f"sqlite+aiosqlite:///{db}")
    before = _rows(db)
    argv = [sys.executable, "-m", "coordinator", "serve", "--database-url", f"sqlite+aiosqlite:///{db}",
            "--port", str(free_port()), "--allow-location", f"gs://{bucket}/tables",
            "--managed-location", f"gs://{bucket}/tables/managed"]
    res = subprocess.run(argv, cwd=str(ROOT), capture_output=True, text=True, timeout=60, env=_no_cloud_env(tmp_path))
    assert res.returncode == 2
    line = _one_line(res)
    assert line.startswith("error: gs:// tables are allowed here, but no Google Cloud credentials: set "
                           "COMMIT_OWNER_GCS_CREDENTIALS_FILE"), line
    assert "COMMIT_OWNER_GCS_TOKEN" in line and "GOOGLE_APPLICATION_CREDENTIALS" in line
    assert "listening" not in res.stdout + res.stderr
    assert _rows(db) == before
    with urllib.request.urlopen(f"{fake_gcs.endpoint}/storage/v1/b/{bucket}/o", timeout=10) as r:
        assert json.loads(r.read()).get("items", []) == []

    # Against an emulator endpoint (anonymous), or with a token, it serves.
    _serves(argv, _no_cloud_env(tmp_path, COMMIT_OWNER_GCS_ENDPOINT=fake_gcs.endpoint))
    _serves(argv, _no_cloud_env(tmp_path, COMMIT_OWNER_GCS_TOKEN="ya29.not-checked-at-start"))
