// Contract fixture: the commit info view (carries the in-commit timestamp).
package io.delta.storage.commit.actions;

public interface AbstractCommitInfo {
    long getCommitTimestamp();
}
