// Contract fixture: how Delta identifies a table to the coordinator client.
package io.delta.storage.commit;

import java.util.Map;
import java.util.Optional;

import org.apache.hadoop.fs.Path;

public class TableDescriptor {
    private final Path logPath;
    private final Optional<TableIdentifier> tableIdentifier;
    private final Map<String, String> tableConf;

    public TableDescriptor(Path logPath, Optional<TableIdentifier> tableIdentifier, Map<String, String> tableConf) {
        this.logPath = logPath;
        this.tableIdentifier = tableIdentifier;
        this.tableConf = tableConf;
    }

    public Optional<TableIdentifier> getTableIdentifier() { return tableIdentifier; }

    public Path getLogPath() { return logPath; }

    public Map<String, String> getTableConf() { return tableConf; }
}
