// Contract fixture: commit info and metadata/protocol changes that accompany a commit.
package io.delta.storage.commit;

import java.util.Collections;
import java.util.List;

import io.delta.storage.commit.actions.AbstractCommitInfo;
import io.delta.storage.commit.actions.AbstractDomainMetadata;
import io.delta.storage.commit.actions.AbstractMetadata;
import io.delta.storage.commit.actions.AbstractProtocol;

public class UpdatedActions {
    private final AbstractCommitInfo commitInfo;
    private final AbstractMetadata newMetadata;
    private final AbstractProtocol newProtocol;
    private final AbstractMetadata oldMetadata;
    private final AbstractProtocol oldProtocol;
    private final List<AbstractDomainMetadata> domainMetadata;

    public UpdatedActions(AbstractCommitInfo commitInfo, AbstractMetadata newMetadata, AbstractProtocol newProtocol,
                          AbstractMetadata oldMetadata, AbstractProtocol oldProtocol) {
        this(commitInfo, newMetadata, newProtocol, oldMetadata, oldProtocol, Collections.emptyList());
    }

    public UpdatedActions(AbstractCommitInfo commitInfo, AbstractMetadata newMetadata, AbstractProtocol newProtocol,
                          AbstractMetadata oldMetadata, AbstractProtocol oldProtocol,
                          List<AbstractDomainMetadata> domainMetadata) {
        this.commitInfo = commitInfo;
        this.newMetadata = newMetadata;
        this.newProtocol = newProtocol;
        this.oldMetadata = oldMetadata;
        this.oldProtocol = oldProtocol;
        this.domainMetadata = domainMetadata == null ? Collections.emptyList() : domainMetadata;
    }

    public AbstractCommitInfo getCommitInfo() { return commitInfo; }

    public AbstractMetadata getNewMetadata() { return newMetadata; }

    public AbstractProtocol getNewProtocol() { return newProtocol; }

    public AbstractMetadata getOldMetadata() { return oldMetadata; }

    public AbstractProtocol getOldProtocol() { return oldProtocol; }

    public List<AbstractDomainMetadata> getDomainMetadata() { return domainMetadata; }
}
