// Contract fixture, not delta-spark: a builder that needs the AWS SDK v1 DynamoDB client class to exist.
package io.delta.dynamodbcommitcoordinator;

import com.amazonaws.services.dynamodbv2.AmazonDynamoDB;

public final class DynamoDBCommitCoordinatorClientBuilder {
    private final String clientClass = AmazonDynamoDB.class.getName();

    public String getName() {
        return "dynamodb";
    }
}
