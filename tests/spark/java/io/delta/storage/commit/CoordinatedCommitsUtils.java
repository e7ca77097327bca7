// Contract fixture: only the helper the bridge probes to learn the staged-commit folder.
// Delta 4.x names it `_staged_commits`; the fixture follows that line.
package io.delta.storage.commit;

import org.apache.hadoop.fs.Path;

public class CoordinatedCommitsUtils {
    private CoordinatedCommitsUtils() {}

    public static Path commitDirPath(Path logPath) {
        return new Path(logPath, "_staged_commits");
    }
}
