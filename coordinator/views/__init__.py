"""Read models for people: what the browser UI's pages show, read through the store and storage, never in the commit path."""
