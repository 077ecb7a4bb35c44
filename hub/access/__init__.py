"""Who is calling and what they may see (DESIGN.md §7); imports the storage room, never the serving one.

* ``identity`` — peer credentials, tokens, the caller's identity and scope, the operator rule (§7.2–§7.5);
* ``registry`` — principals, tokens and teams in ``principals.toml``, watched for changes (§7.3, §7.8);
* ``mounts`` — a caller's view: its own scope at the root and each team at ``@NAME/``, the roles (§7.8);
* ``tidy_runs`` — review-forced tidy runs, whose callers write proposals only (§21);
* ``config`` — the settings a Hub runs with, from ``config.toml`` (§13.2).
"""
