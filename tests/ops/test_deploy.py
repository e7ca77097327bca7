"""docker-compose.yml and the Dockerfile, checked without a Docker engine: structure, ports, health checks,
and that every COMMIT_OWNER_* variable they set is a declared setting."""

from __future__ import annotations

import fnmatch
import re
from typing import Any
from urllib.parse import urlparse

import pytest
import tomllib
import yaml

from coordinator.runtime.settings import ENV_PREFIX, SETTINGS
from tests.support import ROOT

DECLARED = {s.env for s in SETTINGS} | {ENV_PREFIX + "CONFIG"}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _env(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: str(v) for k, v in env.items()}


def _ports(service: dict[str, Any]) -> dict[int, int]:
    """container port -> published host port"""
    out = {}
    for p in service.get("ports", []):
        host, container = str(p).rsplit(":", 1)[-2:] if str(p).count(":") else (p, p)
        out[int(container)] = int(str(host).rsplit(":", 1)[-1])
    return out


def test_compose_has_postgres_minio_the_bucket_and_the_owner(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert {"postgres", "minio", "create-bucket", "owner"} <= set(services)
    assert services["postgres"]["image"].startswith("postgres:")
    assert services["minio"]["image"].startswith(("minio/minio", "quay.io/minio/minio"))
    for name in ("postgres", "minio", "owner"):
        hc = services[name].get("healthcheck")
        assert hc and hc["test"], f"{name} has no health check"
    assert "/readyz" in " ".join(services["owner"]["healthcheck"]["test"])
    assert "mb" in " ".join(services["create-bucket"]["command"])


def test_the_owner_is_built_here_migrates_then_serves_after_its_dependencies(compose: dict[str, Any]) -> None:
    owner = compose["services"]["owner"]
    assert owner["build"] in (".", {"context": "."})
    command = " ".join(owner["command"]) if isinstance(owner["command"], list) else owner["command"]
    assert re.search(r"commit-owner migrate\b.*&&.*commit-owner serve\b", command)
    deps = owner["depends_on"]
    assert deps["postgres"]["condition"] == "service_healthy"
    assert deps["create-bucket"]["condition"] == "service_completed_successfully"
    assert compose["services"]["create-bucket"]["depends_on"]["minio"]["condition"] == "service_healthy"


def test_owner_environment_uses_only_declared_settings_and_matches_the_wiring(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name, svc in services.items():
        for key in _env(svc):
            if key.startswith(ENV_PREFIX):
                assert key in DECLARED, f"{name} sets {key}, which is not a setting in coordinator/runtime/settings.py"
    env = _env(services["owner"])
    db = urlparse(env["COMMIT_OWNER_DATABASE_URL"])
    pg_env = _env(services["postgres"])
    assert db.hostname == "postgres" and db.path.lstrip("/") == pg_env["POSTGRES_DB"]
    assert db.username == pg_env["POSTGRES_USER"] and db.password == pg_env["POSTGRES_PASSWORD"]
    s3 = urlparse(env["COMMIT_OWNER_S3_ENDPOINT_URL"])
    assert s3.hostname == "minio" and s3.port == 9000
    minio_env = _env(services["minio"])
    assert env["COMMIT_OWNER_S3_ACCESS_KEY_ID"] == minio_env["MINIO_ROOT_USER"]
    assert env["COMMIT_OWNER_S3_SECRET_ACCESS_KEY"] == minio_env["MINIO_ROOT_PASSWORD"]
    assert env["COMMIT_OWNER_HOST"] == "0.0.0.0"
    port = int(env["COMMIT_OWNER_PORT"])
    assert _ports(services["owner"]) == {port: 8080}
    assert _ports(services["minio"])[9000] == 9000
    assert str(port) in " ".join(services["owner"]["healthcheck"]["test"])


def test_dockerfile_installs_the_package_built_from_pyproject() -> None:
    text = (ROOT / "Dockerfile").read_text()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert re.search(r"^COPY pyproject\.toml\b", text, re.M)
    assert re.search(r"pip (wheel|install)\b[^\n]*\s'?\.(\[[\w,-]+\])?'?\s*$", text, re.M), "the image must be built from ."
    copied = {src for line in re.findall(r"^COPY (?!--from)(.+)$", text, re.M) for src in line.split()[:-1]}
    wheel = pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]
    needed = set(wheel["packages"]) | set(wheel.get("force-include", {})) | {pyproject["project"]["readme"]}
    assert needed <= copied, f"Dockerfile does not copy {needed - copied}"
    assert 'ENTRYPOINT ["commit-owner"]' in text and "/readyz" in text
    for key in re.findall(r"\b(COMMIT_OWNER_[A-Z0-9_]+)=", text):
        assert key in DECLARED, f"Dockerfile sets {key}, which is not a declared setting"
    # nothing the image is built from is left out of the build context
    ignored = [ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines()
               if ln.strip() and not ln.startswith("#")]
    for path in needed | {"pyproject.toml"}:
        assert not any(fnmatch.fnmatch(path, pat) for pat in ignored), f".dockerignore excludes {path}"
    assert ".venv" in ignored and ".git" in ignored
