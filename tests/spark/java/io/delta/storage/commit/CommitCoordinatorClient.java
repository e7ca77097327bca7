// Contract fixture: the client interface a commit coordinator implements (same signatures as Delta 4.x).
package io.delta.storage.commit;

import java.io.IOException;
import java.util.Iterator;
import java.util.Map;
import java.util.Optional;

import io.delta.storage.LogStore;
import io.delta.storage.commit.actions.AbstractMetadata;
import io.delta.storage.commit.actions.AbstractProtocol;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;

public interface CommitCoordinatorClient {
    Map<String, String> registerTable(
        Path logPath,
        Optional<TableIdentifier> tableIdentifier,
        long currentVersion,
        AbstractMetadata currentMetadata,
        AbstractProtocol currentProtocol);

    CommitResponse commit(
        LogStore logStore,
        Configuration hadoopConf,
        TableDescriptor tableDescriptor,
        long commitVersion,
        Iterator<String> actions,
        UpdatedActions updatedActions) throws CommitFailedException;

    GetCommitsResponse getCommits(TableDescriptor tableDescriptor, Long startVersion, Long endVersion);

    void backfillToVersion(
        LogStore logStore,
        Configuration hadoopConf,
        TableDescriptor tableDescriptor,
        long version,
        Long lastKnownBackfilledVersion) throws IOException;

    default StagingTableInfo createStagingTable(TableIdentifier tableIdentifier) {
        throw new UnsupportedOperationException("not supported by this coordinator");
    }

    boolean semanticEquals(CommitCoordinatorClient other);
}
