"""What each Hub method does (DESIGN.md §2.2, §3.4): the route table and the work behind every entry.

Imports the storage and access rooms, never the serving one.

* ``routes`` — the route table: each method once, with who may call it, how it meets mounts, whether it takes
  its scope's lock or may become a proposal, its parser and its handler; ``calls`` — what a route and a call are;
* ``across_mounts`` — a method over a caller's view: the parts its paths name, answers shown mounted (§7.8);
* ``memory`` — :class:`~hub.methods.memory.MemoryMethods`, the handlers over one scope: locks, writes with
  history, reads;
* ``search`` — the bounded literal scan (§5); ``health`` — memory health (§23);
* ``copies`` — copy and move between scopes, the operator's scope copy (§7.8); ``backup_staging`` — each scope
  staged under its lock for a backup (§15.8);
* ``review`` — proposing agents' writes and deciding proposals (§21);
* ``secrets`` — credentials kept out of writes (§16); ``scan_report`` — the ``scan`` answer;
* ``invitations`` — what a caller with no identity may ask: the Hub's CA, and redeeming an invitation (§7.4).
"""
