"""``amux ui``: the local web page over the caller's memory (DESIGN.md §20).

``serve`` binds and runs it, ``security`` is its front door, ``app`` its
routes, ``hub_calls`` what each page asks the Hub, ``render`` the safe HTML of
hostile notes, ``restart`` the settings page's "Restart the Hub";
``templates/`` and ``static/`` are package data.  Nothing here is imported
unless ``amux ui`` runs.
"""
