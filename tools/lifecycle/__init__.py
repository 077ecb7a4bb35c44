"""The Hub's life cycle, outside every frontend (DESIGN.md §19): its service files' names, places and text
(:mod:`tools.lifecycle.units`), installing and removing them (:mod:`tools.lifecycle.install`), which
service manager runs a Hub (:mod:`tools.lifecycle.manager`), start, stop, restart and status as data
(:mod:`tools.lifecycle.control`), and starting ``amux hub serve`` and waiting until it answers
(:mod:`tools.lifecycle.spawn`).  The CLI, the web page (DESIGN.md §20), the tests and the bench share
it; it imports only :mod:`tools.client` and :mod:`protocol`.  This package's ``__init__`` imports nothing."""
