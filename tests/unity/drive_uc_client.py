"""Drive the owner with the real `unitycatalog-client` (run in .venv-uc, whose pins differ from the service's).

Usage: drive_uc_client.py ENDPOINT TOKEN CATALOG. Prints one JSON object: what each step returned, and for
each refusal the ApiException's status and the error_code of its body. Local disk only (the staged files
are written with plain file I/O, as a writer on the same machine would).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from collections.abc import Awaitable
from typing import Any

from unitycatalog.client import (
    ApiClient,
    ApiException,
    CatalogsApi,
    Configuration,
    DeltaCommitsApi,
    SchemasApi,
    TablesApi,
)
from unitycatalog.client.models import (
    ColumnInfo,
    ColumnTypeName,
    CreateCatalog,
    CreateSchema,
    CreateStagingTable,
    CreateTable,
    DataSourceFormat,
    DeltaCommit,
    DeltaCommitInfo,
    TableType,
)


def local(uri: str) -> str:
    assert uri.startswith("file://"), uri
    return uri[len("file://"):]


def write(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


_clock = [int(time.time() * 1000)]


def ict() -> int:
    _clock[0] = max(_clock[0] + 1, int(time.time() * 1000))
    return _clock[0]


def ndjson(actions: list[dict[str, Any]]) -> bytes:
    return ("\n".join(json.dumps(a, separators=(",", ":")) for a in actions) + "\n").encode()


def version0(table_id: str) -> bytes:
    t = ict()
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    return ndjson([
        {"commitInfo": {"inCommitTimestamp": t, "timestamp": t, "operation": "CREATE TABLE"}},
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["catalogManaged"],
                      "writerFeatures": ["catalogManaged", "inCommitTimestamp"]}},
        {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                      "schemaString": json.dumps(schema), "partitionColumns": [],
                      "configuration": {"delta.enableInCommitTimestamps": "true",
                                        "delta.feature.catalogManaged": "supported",
                                        "io.unitycatalog.tableId": table_id}, "createdTime": t}},
    ])


def data_commit() -> bytes:
    t = ict()
    return ndjson([
        {"commitInfo": {"inCommitTimestamp": t, "timestamp": t, "operation": "WRITE", "txnId": str(uuid.uuid4())}},
        {"add": {"path": f"part-{uuid.uuid4().hex}.parquet", "partitionValues": {}, "size": 100,
                 "modificationTime": t, "dataChange": True}},
    ])


async def refused(call: Awaitable[Any]) -> dict[str, Any]:
    try:
        await call
    except ApiException as e:
        body = json.loads(e.body) if e.body else {}
        return {"status": e.status, "error_code": body.get("error_code")}
    return {"status": 200, "error_code": None}


async def main(endpoint: str, token: str, catalog: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    config = Configuration(host=endpoint + "/api/2.1/unity-catalog")
    # The generated client declares no security scheme: the bearer token goes in as a default header.
    async with ApiClient(config, header_name="Authorization", header_value=f"Bearer {token}") as client:
        catalogs, schemas, tables, commits = (CatalogsApi(client), SchemasApi(client), TablesApi(client),
                                              DeltaCommitsApi(client))
        out["catalog"] = (await catalogs.create_catalog(CreateCatalog(name=catalog, comment="from the client"))).name
        out["catalog_again"] = await refused(catalogs.create_catalog(CreateCatalog(name=catalog)))
        await schemas.create_schema(CreateSchema(name="s", catalog_name=catalog))
        listed = await schemas.list_schemas(catalog_name=catalog, max_results=10)
        out["schemas"] = [s.full_name for s in listed.schemas or []]
        out["schema_missing"] = await refused(schemas.get_schema(f"{catalog}.missing"))

        staging = await tables.create_staging_table(CreateStagingTable(name="t", catalog_name=catalog, schema_name="s"))
        loc = staging.staging_location
        out["staging"] = {"id": staging.id, "location": loc}
        write(f"{local(loc)}/_delta_log/{0:020d}.json", version0(staging.id))
        column = ColumnInfo(name="id", type_text="bigint", type_name=ColumnTypeName.LONG, position=0, nullable=True,
                            type_json=json.dumps({"name": "id", "type": "long", "nullable": True, "metadata": {}}))
        created = await tables.create_table(CreateTable(
            name="t", catalog_name=catalog, schema_name="s", table_type=TableType.MANAGED,
            data_source_format=DataSourceFormat.DELTA, columns=[column], storage_location=loc,
            properties={"io.unitycatalog.tableId": staging.id}))
        info = await tables.get_table(f"{catalog}.s.t")
        out["table"] = {"created_id": created.table_id, "table_id": info.table_id, "type": info.table_type.value,
                        "columns": [c.name for c in info.columns or []],
                        "property_id": (info.properties or {}).get("io.unitycatalog.tableId"),
                        "created_at": info.created_at, "updated_at": info.updated_at}
        out["table_missing"] = await refused(tables.get_table(f"{catalog}.s.missing"))

        def stage(version: int) -> DeltaCommitInfo:
            data = data_commit()
            name = f"{version:020d}.{uuid.uuid4()}.json"
            path = f"{local(loc)}/_delta_log/_staged_commits/{name}"
            write(path, data)
            return DeltaCommitInfo(version=version, timestamp=ict(), file_name=name, file_size=len(data),
                                   file_modification_timestamp=int(os.path.getmtime(path) * 1000))

        def commit(ci: DeltaCommitInfo, **kw: Any) -> Awaitable[Any]:
            body = DeltaCommit(table_id=staging.id, table_uri=kw.pop("uri", loc), commit_info=ci, **kw)
            return commits.commit(body)

        first = stage(1)
        out["commit_1"] = await refused(commit(first))
        out["commit_1_retry"] = await refused(commit(first))
        out["commit_1_other_file"] = await refused(commit(stage(1)))
        out["commit_3_gap"] = await refused(commit(stage(3)))
        out["wrong_uri"] = await refused(commit(stage(2), uri=loc + "-elsewhere"))
        missing = stage(2)
        os.remove(f"{local(loc)}/_delta_log/_staged_commits/{missing.file_name}")
        out["missing_staged_file"] = await refused(commit(missing))
        wrong_size = stage(2)
        wrong_size.file_size += 1
        out["wrong_size"] = await refused(commit(wrong_size))
        out["commit_2"] = await refused(commit(stage(2)))
        out["commit_3_backlog"] = await refused(commit(stage(3)))  # the service's cap is 2 unbackfilled commits
        out["unknown_table"] = await refused(commits.commit(DeltaCommit(
            table_id=str(uuid.uuid4()), table_uri=loc, commit_info=stage(3))))
        out["staged_files"] = sorted(os.listdir(f"{local(loc)}/_delta_log/_staged_commits"))
        out["first_file"] = first.file_name
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(*sys.argv[1:4]))))
