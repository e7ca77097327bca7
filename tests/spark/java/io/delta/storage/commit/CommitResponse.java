// Contract fixture: what commit() returns.
package io.delta.storage.commit;

public class CommitResponse {
    private final Commit commit;

    public CommitResponse(Commit commit) { this.commit = commit; }

    public Commit getCommit() { return commit; }
}
