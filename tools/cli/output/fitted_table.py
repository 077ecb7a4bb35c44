"""A table that fits the terminal's width: shorter forms first, then wrapped cells, never cut (DESIGN.md §17)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text


class FittedTable:
    """A borderless table that fits the terminal's width by narrowing the columns that can take it, in order.

    Each column is ``(header, justify, cells, narrowable)``; a column that
    is not narrowable (a revision, a count) keeps its natural width (its
    longest cell) and never wraps.  ``alternatives`` are ``(column, cells,
    header)`` triples, shorter forms of a column tried in turn first while the
    table is too wide (the short session of the "by" cell, the short time;
    ``header`` ``None`` keeps the column's).  ``steps`` are ``(column,
    floor)`` pairs tried in turn next: the column is narrowed, at most down
    to ``floor`` (its cells then wrap at spaces or fold, so nothing more is
    cut); a column in ``snap`` goes straight to its floor once narrowed (a
    time cell wraps at its one space, so any width between is wasted).
    Widths are terminal cells.  Built at print time, for the console's width
    (rich's renderable protocol), DESIGN.md §17.
    """

    GAP = 2
    """Spaces between two columns: the cell's right padding and the box's column separator."""

    def __init__(self, columns: list[tuple[str, str, list[Text], bool]], steps: list[tuple[int, int]],
                 alternatives: list[tuple[int, list[Text], str | None]] | None = None,
                 snap: frozenset[int] = frozenset()) -> None:
        self.columns = columns
        self.steps = steps
        self.alternatives = alternatives or []
        self.snap = snap

    def widths(self, available: int) -> tuple[list[int], list[list[Text]], list[str]]:
        """The width of each column (terminal cells, padding excluded), the cells and the headers to show, for
        ``available``."""
        cells = [list(column[2]) for column in self.columns]
        headers = [column[0] for column in self.columns]

        def natural(index: int) -> int:
            return max([len(headers[index]), *(cell.cell_len for cell in cells[index])])

        widths = [natural(i) for i in range(len(self.columns))]
        budget = available - self.GAP * (len(self.columns) - 1)
        for index, shorter, header in self.alternatives:
            if sum(widths) > budget:
                cells[index] = shorter
                headers[index] = header if header is not None else headers[index]
                widths[index] = natural(index)
        for index, floor in self.steps:
            excess = sum(widths) - budget
            if excess <= 0:
                break
            if index in self.snap:
                widths[index] = min(floor, widths[index])
            else:
                widths[index] = max(min(floor, widths[index]), widths[index] - excess)
        return widths, cells, headers

    def table(self, available: int) -> Table:
        """The rich table for a terminal ``available`` cells wide."""
        from rich import box
        from rich.table import Table

        widths, cells, headers = self.widths(available)
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0),
                      header_style="bold")
        for (_, justify, _, narrowable), header, width in zip(self.columns, headers, widths, strict=True):
            table.add_column(header, justify="right" if justify == "right" else "left", width=width,
                             no_wrap=not narrowable, overflow="fold")
        for row in zip(*cells, strict=True):
            table.add_row(*row)
        return table

    def __rich_console__(self, console: Console, options: Any) -> Any:
        """Yield the table built for the width rich gives (rich's renderable protocol)."""
        yield self.table(options.max_width)
