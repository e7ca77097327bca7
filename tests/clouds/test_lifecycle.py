"""The lifecycle on Azure and Google Cloud Storage: delta-rs tables taken under ownership, written through the
owner and handed back, tables created by the client, the snapshot reader over unbackfilled commits; delta-rs
reads what the owner published. The same functions as tests/lifecycle/, on this folder's cloud backends
(conftest.py). Where delta-rs must write first, the GCS runs skip: fake-gcs-server lacks the upload delta-rs
uses (docs/storage.md)."""

from __future__ import annotations

from tests.lifecycle.test_create import (  # noqa: F401  (collected here, on the cloud backends)
    test_a_catalog_managed_table_is_created_read_and_appended_with_the_owners_client,
    test_creating_over_an_existing_table_changes_nothing,
    test_eight_concurrent_creators_one_wins,
    test_lost_first_put_forgets_the_registration,
    test_version_zero_carries_protocol_ict_owner_and_table_conf,
)
from tests.lifecycle.test_round_trip import (  # noqa: F401
    test_a_released_table_can_be_taken_over_again,
    test_delta_rs_table_taken_over_written_through_owner_and_handed_back,
    test_preview_generation_uses_its_names_and_the_staged_commits_folder,
)
from tests.lifecycle.test_snapshot_owner import (  # noqa: F401
    test_backfill_between_listing_and_asking_is_detected_and_relisted,
    test_latest_version_is_exact_and_old_versions_come_from_published_files,
    test_reader_builds_its_own_client_from_the_owner_conf,
    test_unbackfilled_commits_on_top_of_a_checkpoint,
)
