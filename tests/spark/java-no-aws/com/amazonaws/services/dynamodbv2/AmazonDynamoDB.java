// Contract fixture, not the AWS SDK: compiled so the builder compiles; the test removes its class file to
// reproduce a driver without aws-java-sdk-dynamodb, and keeps it to stand for a driver that has the jar.
package com.amazonaws.services.dynamodbv2;

public interface AmazonDynamoDB {}
