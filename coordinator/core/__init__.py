"""The core: the commit path (ratify, read, register), the catalog over it, and the rules of what a commit may hold."""
