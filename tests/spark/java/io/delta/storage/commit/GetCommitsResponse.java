// Contract fixture: what getCommits() returns.
package io.delta.storage.commit;

import java.util.List;

public class GetCommitsResponse {
    private final List<Commit> commits;
    private final long latestTableVersion;

    public GetCommitsResponse(List<Commit> commits, long latestTableVersion) {
        this.commits = commits;
        this.latestTableVersion = latestTableVersion;
    }

    public List<Commit> getCommits() { return commits; }

    public long getLatestTableVersion() { return latestTableVersion; }
}
