"""Serving: sockets, connections, the Hub object, start-up and HTTP (DESIGN.md §2, §13, §19.6).

* ``listeners`` — the Unix socket, TCP/TLS, the accept loop, the HTTP listeners' shared settings;
* ``connection`` — one connection: frames in, the handshake, requests as tasks, frames out (§3);
* ``hub`` — :class:`~hub.serve.hub.Hub`: ``hello``, and each call through the route table (§7);
* ``run`` — ``amux hub serve``: start-up and shutdown (§13.3, §13.4);
* ``home`` — the one-Hub lock and the home's folders at start-up (§13.1);
* ``asgi`` — what the HTTP listeners share (Hypercorn's settings, the lifespan answer);
* ``metrics`` — Prometheus series and health probes (§19.6);
* ``heap`` — freed memory handed back to the OS at a bounded cadence (§6).
"""
