// Contract fixture: stands in for delta-spark 3.2's "managed commits" preview, which the bridge must refuse.
// Only its presence on the classpath matters.
package org.apache.spark.sql.delta.managedcommit;

public final class CommitOwnerProvider {
    private CommitOwnerProvider() {}
}
