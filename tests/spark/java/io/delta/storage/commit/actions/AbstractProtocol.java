// Contract fixture: the protocol view handed to registerTable and in UpdatedActions.
package io.delta.storage.commit.actions;

import java.util.Set;

public interface AbstractProtocol {
    int getMinReaderVersion();

    int getMinWriterVersion();

    Set<String> getReaderFeatures();

    Set<String> getWriterFeatures();
}
