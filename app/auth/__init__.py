"""Who may see and do what: logins, run ownership, per-session locks."""
