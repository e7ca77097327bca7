// Contract fixture: declares the shape of Delta's LogStore as seen by a commit-coordinator client.
package io.delta.storage;

import java.io.IOException;
import java.util.Iterator;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;

public abstract class LogStore {
    private final Configuration initHadoopConf;

    public LogStore(Configuration initHadoopConf) {
        this.initHadoopConf = initHadoopConf;
    }

    public Configuration initHadoopConf() {
        return initHadoopConf;
    }

    public abstract Iterator<String> read(Path path, Configuration hadoopConf) throws IOException;

    public abstract void write(Path path, Iterator<String> actions, Boolean overwrite, Configuration hadoopConf)
        throws IOException;

    public abstract Iterator<FileStatus> listFrom(Path path, Configuration hadoopConf) throws IOException;

    public abstract Path resolvePathOnPhysicalStorage(Path path, Configuration hadoopConf) throws IOException;

    public abstract Boolean isPartialWriteVisible(Path path, Configuration hadoopConf) throws IOException;
}
