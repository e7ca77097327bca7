// Contract fixture: the checked exception commit() throws, with Delta's (retryable, conflict) flags.
package io.delta.storage.commit;

public class CommitFailedException extends Exception {
    private final boolean retryable;
    private final boolean conflict;
    private final String message;

    public CommitFailedException(boolean retryable, boolean conflict, String message) {
        this.retryable = retryable;
        this.conflict = conflict;
        this.message = message;
    }

    public boolean getRetryable() { return retryable; }

    public boolean getConflict() { return conflict; }

    @Override
    public String getMessage() { return message; }
}
