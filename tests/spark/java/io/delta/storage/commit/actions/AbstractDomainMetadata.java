// Contract fixture: the domain metadata view.
package io.delta.storage.commit.actions;

public interface AbstractDomainMetadata {
    String getDomain();

    String getConfiguration();

    boolean isRemoved();
}
