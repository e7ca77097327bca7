// Contract fixture: Delta declares this as a Scala trait with two abstract methods, which compiles to
// exactly this Java interface (conf is a Scala immutable Map).
package org.apache.spark.sql.delta.coordinatedcommits;

import io.delta.storage.commit.CommitCoordinatorClient;
import org.apache.spark.sql.SparkSession;

public interface CommitCoordinatorBuilder {
    String getName();

    CommitCoordinatorClient build(SparkSession spark, scala.collection.immutable.Map<String, String> conf);
}
