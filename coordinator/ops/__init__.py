"""Operations beside the commit path: the orphan janitor and the operator commands' work."""
