// Contract fixture: Delta declares this as a Scala object; its static forwarders have these names.
// One deviation: getRegisteredCoordinatorNames returns a java.util.List here (a Scala Seq in Delta);
// the bridge only calls contains() on it, which both types offer.
package org.apache.spark.sql.delta.coordinatedcommits;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import io.delta.storage.commit.CommitCoordinatorClient;
import org.apache.spark.sql.SparkSession;

public final class CommitCoordinatorProvider {
    private static final Map<String, CommitCoordinatorBuilder> BUILDERS = new HashMap<>();

    private CommitCoordinatorProvider() {}

    public static synchronized void registerBuilder(CommitCoordinatorBuilder builder) {
        String name = builder.getName();
        if (BUILDERS.containsKey(name)) {
            throw new IllegalArgumentException("commit-coordinator: " + name + " already registered");
        }
        BUILDERS.put(name, builder);
    }

    public static synchronized CommitCoordinatorClient getCommitCoordinatorClient(
            String name, scala.collection.immutable.Map<String, String> conf, SparkSession spark) {
        CommitCoordinatorBuilder builder = BUILDERS.get(name);
        if (builder == null) {
            throw new IllegalArgumentException("Unknown commit-coordinator: " + name);
        }
        return builder.build(spark, conf);
    }

    public static synchronized List<String> getRegisteredCoordinatorNames() {
        return new ArrayList<>(BUILDERS.keySet());
    }
}
