"""What the ``amux`` command prints: JSON for scripts, readable text for a person (DESIGN.md §8, §17).

This package's ``__init__`` imports nothing, so a command imports only the modules it prints with; a
JSON call never imports the renderers or rich (§13.6).

* ``contract`` — the output contract: JSON on stdout, errors and exit statuses, when a person reads;
* ``renderer_choice`` — ``RendererChoice``, how a command names its renderer, and the ``Renderer`` names;
* ``console`` — the rich consoles readable output is printed on;
* ``plain`` — short plain lines or JSON for the operating commands (§19);
* ``renderers`` — the table from renderer name to renderer, and ``render``;
* ``pieces`` — what every renderer builds with: text, groups, notices, tables, short revisions, commands;
* ``fitted_table`` — a table that fits the terminal's width, never cutting a cell;
* ``reading`` — search, show, list, export and diff results;
* ``versions`` — history and log: the table of stored versions and its cells;
* ``writes`` — upsert, restore, edit, forget, copy, move, purge, and writes kept for review;
* ``credentials`` — the credentials ``memory scan`` found;
* ``topics`` — typed memory: ``memory new``, ``index`` and ``remove``;
* ``settings`` — ``system config list``;
* ``terminal_errors`` — an error as a person reads it on stderr, with a next step for a person.
"""
