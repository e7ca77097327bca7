// Contract fixture: optional catalog identifier of a table.
package io.delta.storage.commit;

public class TableIdentifier {
    private final String[] namespace;
    private final String name;

    public TableIdentifier(String[] namespace, String name) {
        this.namespace = namespace;
        this.name = name;
    }

    public String[] getNamespace() { return namespace; }

    public String getName() { return name; }
}
