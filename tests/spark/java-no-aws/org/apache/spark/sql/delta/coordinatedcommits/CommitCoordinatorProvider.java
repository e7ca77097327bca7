// Contract fixture, not delta-spark: a commit-coordinator provider that, like delta-spark 4.x's, builds the
// DynamoDB coordinator builder when it is first used. The test leaves the AWS SDK v1 class out of the class
// path, so the JVM fails here with NoClassDefFoundError: com/amazonaws/..., as delta-spark does without it.
package org.apache.spark.sql.delta.coordinatedcommits;

import io.delta.dynamodbcommitcoordinator.DynamoDBCommitCoordinatorClientBuilder;
import java.util.Set;
import java.util.TreeSet;

public final class CommitCoordinatorProvider {
    // Initialized on first use, like the Scala object behind delta-spark's static forwarders.
    private static final class Module {
        static final Set<String> NAMES = new TreeSet<>();

        static {
            NAMES.add(new DynamoDBCommitCoordinatorClientBuilder().getName());
        }
    }

    private CommitCoordinatorProvider() {}

    public static Set<String> getRegisteredCoordinatorNames() {
        return Module.NAMES;
    }
}
