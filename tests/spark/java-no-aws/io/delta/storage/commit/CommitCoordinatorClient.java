// Contract fixture, not delta-spark: only its presence on the class path matters here.
package io.delta.storage.commit;

public interface CommitCoordinatorClient {}
