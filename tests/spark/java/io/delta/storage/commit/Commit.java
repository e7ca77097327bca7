// Contract fixture: one ratified commit file.
package io.delta.storage.commit;

import org.apache.hadoop.fs.FileStatus;

public class Commit {
    private final long version;
    private final FileStatus fileStatus;
    private final long commitTimestamp;

    public Commit(long version, FileStatus fileStatus, long commitTimestamp) {
        this.version = version;
        this.fileStatus = fileStatus;
        this.commitTimestamp = commitTimestamp;
    }

    public long getVersion() { return version; }

    public FileStatus getFileStatus() { return fileStatus; }

    public long getCommitTimestamp() { return commitTimestamp; }

    public Commit withFileStatus(FileStatus other) { return new Commit(version, other, commitTimestamp); }

    public Commit withCommitTimestamp(long other) { return new Commit(version, fileStatus, other); }
}
