"""Who may do what: bearer tokens and their scopes, allowed roots."""
