// Contract fixture: placeholder for the catalog staging-table value type (unused by path-based tables).
package io.delta.storage.commit;

public class StagingTableInfo {
}
