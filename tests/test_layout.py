"""The Delta log layout's one home (client.contract.layout): names, folders, locations, "already exists"."""

from __future__ import annotations

import errno
import uuid

import pytest

from client.contract import layout
from client.contract.errors import InvalidArgumentError


def test_file_names_round_trip() -> None:
    uid = str(uuid.uuid4())
    assert layout.delta_file_name(7) == "00000000000000000007.json"
    assert layout.parse_delta_file(layout.delta_file_name(7)) == 7
    assert layout.parse_staged_file(layout.staged_file_name(12, uid)) == (12, uid)
    assert layout.parse_staged_file(layout.staged_file_name(3)).version == 3
    assert layout.checkpoint_file_names(10) == ["00000000000000000010.checkpoint.parquet"]
    assert [layout.parse_checkpoint_file(n) for n in layout.checkpoint_file_names(10, 2)] == [(10, 1, 2), (10, 2, 2)]
    assert layout.parse_versioned_file("00000000000000000010.checkpoint.parquet") == 10
    assert layout.parse_versioned_file("00000000000000000011.json") == 11


def test_data_file_names_of_a_write() -> None:
    a, b = layout.new_batch_folder(), layout.new_batch_folder()
    assert a != b and a.startswith(layout.BATCH_PREFIX) and len(a) == len(layout.BATCH_PREFIX) + 32
    name = layout.data_file_name(3)
    assert name.startswith("part-00003-") and name.endswith(".parquet") and name != layout.data_file_name(3)
    assert layout.parse_versioned_file(name) is None and layout.parse_staged_file(name) is None


@pytest.mark.parametrize("name", [
    "7.json", "00000000000000000007.json.tmp", "00000000000000000007.not-a-uuid-but-thirty-six-chars-x.json",
    "../00000000000000000007." + str(uuid.uuid4()) + ".json", "00000000000000000007." + str(uuid.uuid4()),
])
def test_foreign_names_are_not_staged_commits(name: str) -> None:
    assert layout.parse_staged_file(name) is None


def test_uris_of_a_table() -> None:
    loc = "s3://bkt/t"
    assert layout.delta_file(loc, 1) == "s3://bkt/t/_delta_log/00000000000000000001.json"
    name = layout.staged_file_name(2, "6f1c2f3e-0000-4000-8000-000000000000")
    assert layout.staged_file(loc, layout.STAGED_COMMITS_DIR, name) == f"s3://bkt/t/_delta_log/_staged_commits/{name}"
    assert layout.check_commit_dir("_commits") == "_commits"
    with pytest.raises(InvalidArgumentError, match="_commits, _staged_commits"):
        layout.check_commit_dir("_other")


def test_one_rule_for_locations_and_bucket_case() -> None:
    assert layout.normalize_location("/tmp/a/../b/") == "file:///tmp/b"
    assert layout.normalize_location("S3A://My-Bucket/k//x/") == "s3://my-bucket/k/x"
    assert layout.normalize_prefix("s3://My-Bucket/") == "s3://my-bucket"
    assert layout.normalize_prefix("/data/x/") == "file:///data/x"
    with pytest.raises(InvalidArgumentError, match="absolute path"):
        layout.normalize_location("warehouse/t2")
    for bad in ("hdfs://x/y", "s3://bucket-only", "s3://b/k", "file://host/x", "/"):
        with pytest.raises(InvalidArgumentError):
            layout.normalize_location(bad)


def test_client_and_server_spell_locations_alike() -> None:
    from client.storage import LogStorage
    from coordinator.security.roots import parse_root
    from coordinator.security.tokens import normalize_prefix

    assert LogStorage("s3://Bkt/t/").location == layout.normalize_location("s3://bkt/t")
    assert parse_root("s3://Bkt/").uri == normalize_prefix("s3a://BKT") == "s3://bkt"


def test_lost_put_if_absent_per_backend() -> None:
    assert layout.lost_put_if_absent(FileExistsError(errno.EEXIST, "exists"))
    for text in ("An error occurred (PreconditionFailed)", "An error occurred (ConditionalRequestConflict)"):
        try:
            try:
                raise RuntimeError(text)
            except RuntimeError as inner:
                raise OSError(errno.EINVAL, "write failed") from inner
        except OSError as e:
            assert layout.lost_put_if_absent(e)
    assert not layout.lost_put_if_absent(OSError(errno.EIO, "disk on fire"))
    assert not layout.lost_put_if_absent(PermissionError(errno.EACCES, "denied"))


def test_deletion_vector_file_names() -> None:
    """The examples of Delta's PROTOCOL.md (deletion vector descriptors)."""
    assert layout.deletion_vector_file("u", "ab^-aqEH.-t@S}K{vb[*k^") == \
        "ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    assert layout.deletion_vector_file("u", "vBn[lx{q8@P<9BNH/isA") == \
        "deletion_vector_61d16c75-6994-46b7-a15b-8b538852e50e.bin"
    assert layout.deletion_vector_file("p", "s3://t/dv.bin") == "s3://t/dv.bin"
    assert layout.deletion_vector_file("i", "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L") is None
    with pytest.raises(InvalidArgumentError, match="Z85"):
        layout.deletion_vector_file("u", "short")


def test_random_uuid_is_a_version_4_uuid_in_its_canonical_spelling() -> None:
    seen = {layout.random_uuid() for _ in range(2000)}
    assert len(seen) == 2000
    for u in seen:
        parsed = uuid.UUID(u)
        assert str(parsed) == u and parsed.version == 4 and parsed.variant == uuid.RFC_4122
    name = layout.staged_file_name(7)
    assert layout.parse_staged_file(name).version == 7


def test_parse_uuid_answers_the_canonical_spelling_and_refuses_the_rest() -> None:
    from coordinator.api.parse import parse_uuid
    from coordinator.store.rows import TableRow

    u = str(uuid.uuid4())
    assert parse_uuid(u, "table id") == u
    assert parse_uuid(u.upper(), "table id") == u
    assert parse_uuid("{" + u + "}", "table id") == u
    for bad in ("x", u + "\n", u[:-1], u + "0", None, 5):
        with pytest.raises(InvalidArgumentError, match="table id must be a UUID"):
            parse_uuid(bad, "table id")
    # and the backfiller's copy of a table row is the copy dataclasses.replace makes
    import dataclasses
    row = TableRow(u, "file:///t", "_commits", 0, 5, 3, None, True, "ACTIVE", None, 1, 2, 3, name="c.s.t")
    assert row.with_versions(6, 4) == dataclasses.replace(row, latest_version=6, latest_backfilled_version=4)
    assert row.latest_version == 5 and row.latest_backfilled_version == 3
