"""The order of writers on one table: in this process (the line) and among processes (across)."""
